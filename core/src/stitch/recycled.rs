//! The frame copies a sequence run makes for some of its pairs (a frame smoothed for the
//! whole-overlap refinement, band-passed for a faint pair), kept by the frame while it is
//! held and recycled when it departs: the next frame that needs a copy writes into the
//! departed one's buffer. A fresh frame-sized buffer is faulted in page by page (a PAL
//! frame's f32 copy: 1.6 MB, some 400 pages, about 1 ms on the 2-core VM, more than its
//! smoothing), and a long run makes one at every keyframe; the allocator hands the freed
//! pages to whatever asks first, so only a buffer passed on by hand stays warm.

use crate::error::Result;
use crate::image::Image;
use alloc::boxed::Box;
use core::marker::PhantomData;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, Ordering};

/// A value made once through a shared reference, read through shared references after,
/// and taken back by its owner ([`Kept::take`]). Made on two threads at once, the first
/// made stands and the other is handed back to the caller's spares.
pub(super) struct Kept<T> {
    value: AtomicPtr<T>,
    /// Owns a `T` (its drop, and the thread bounds below).
    _owns: PhantomData<*const T>,
}

// SAFETY: a `Kept` owns its value as a `Box` would. Shared, it gives out `&T` (hence
// `T: Sync`) and may be given its value on any thread (hence `T: Send`).
unsafe impl<T: Send + Sync> Sync for Kept<T> {}
// SAFETY: as for `Box<T>`.
unsafe impl<T: Send> Send for Kept<T> {}

impl<T> Default for Kept<T> {
    fn default() -> Self {
        Kept { value: AtomicPtr::new(null_mut()), _owns: PhantomData }
    }
}

impl<T> Kept<T> {
    /// The value, if made.
    pub(super) fn get(&self) -> Option<&T> {
        // SAFETY: a non-null pointer came from `Box::into_raw` and is freed only by `take`
        // or `drop`, which borrow `self` mutably: no `&T` handed out here outlives it.
        unsafe { self.value.load(Ordering::Acquire).as_ref() }
    }

    /// The value, made by `make` (which may fail) where it is not made yet; a value made
    /// here that loses a race with another thread's goes to `spares`.
    pub(super) fn get_or_try_make(&self, spares: &Spares<T>, make: impl FnOnce() -> Result<T>) -> Result<&T> {
        if let Some(v) = self.get() {
            return Ok(v);
        }
        let made = Box::into_raw(Box::new(make()?));
        match self.value.compare_exchange(null_mut(), made, Ordering::AcqRel, Ordering::Acquire) {
            // SAFETY: `made` is now the kept value (see `get`).
            Ok(_) => Ok(unsafe { &*made }),
            Err(first) => {
                // SAFETY: `made` lost: nobody else has seen it; `first` is the kept value.
                spares.put(*unsafe { Box::from_raw(made) });
                Ok(unsafe { &*first })
            }
        }
    }

    /// The value, taken back (none is kept after).
    pub(super) fn take(&mut self) -> Option<T> {
        let p = core::mem::replace(self.value.get_mut(), null_mut());
        // SAFETY: a non-null pointer came from `Box::into_raw`, and is no longer kept.
        (!p.is_null()).then(|| *unsafe { Box::from_raw(p) })
    }
}

impl<T> Drop for Kept<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}

/// Buffers given back by departed frames, at most [`SPARES`], for the next frames to write
/// their copies into. Shared by a run's threads; a buffer put when every place is taken is
/// freed.
pub(super) struct Spares<T> {
    places: [AtomicPtr<T>; SPARES],
    _owns: PhantomData<*const T>,
}

/// Buffers [`Spares`] keeps at most: a frame's smoothed and band-passed copies, a pair's
/// two frames' worth (the copies of the frames a run holds besides stay with them).
pub(super) const SPARES: usize = 4;

// SAFETY: buffers move between threads through the places, as through a channel.
unsafe impl<T: Send> Sync for Spares<T> {}
// SAFETY: as for `Box<T>`.
unsafe impl<T: Send> Send for Spares<T> {}

impl<T> Default for Spares<T> {
    fn default() -> Self {
        Spares { places: core::array::from_fn(|_| AtomicPtr::new(null_mut())), _owns: PhantomData }
    }
}

impl<T> Spares<T> {
    /// A spare buffer that `fits`, if one is kept (those that do not fit stay).
    pub(super) fn take(&self, fits: impl Fn(&T) -> bool) -> Option<T> {
        for place in &self.places {
            let p = place.swap(null_mut(), Ordering::AcqRel);
            if p.is_null() {
                continue;
            }
            // SAFETY: a non-null pointer came from `Box::into_raw` in `put`, and the swap
            // gave it to this thread alone.
            let spare = *unsafe { Box::from_raw(p) };
            if fits(&spare) {
                return Some(spare);
            }
            self.put(spare);
        }
        None
    }

    /// Keeps `spare` for a later [`Spares::take`], or frees it where every place is taken.
    pub(super) fn put(&self, spare: T) {
        let p = Box::into_raw(Box::new(spare));
        for place in &self.places {
            if place.compare_exchange(null_mut(), p, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                return;
            }
        }
        // SAFETY: no place took `p`: it is still this thread's alone.
        drop(unsafe { Box::from_raw(p) });
    }
}

impl<T> Drop for Spares<T> {
    fn drop(&mut self) {
        for place in &mut self.places {
            let p = core::mem::replace(place.get_mut(), null_mut());
            if !p.is_null() {
                // SAFETY: as in `take`.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

impl Spares<Image<f32>> {
    /// A buffer of `w x h` for a frame's copy: a spare of that size, or a new one (whose
    /// pixels are zero; a spare's are the last copy's, and the copy overwrites them all).
    pub(super) fn frame(&self, (w, h): (usize, usize)) -> Result<Image<f32>> {
        match self.take(|s| s.size() == (w, h)) {
            Some(spare) => Ok(spare),
            None => Image::new(w, h),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn a_kept_value_is_made_once_and_taken_back_by_its_owner() {
        let spares = Spares::<Vec<u8>>::default();
        let mut kept = Kept::<Vec<u8>>::default();
        assert!(kept.get().is_none());
        assert_eq!(kept.get_or_try_make(&spares, || Ok(alloc::vec![1, 2])).unwrap(), &alloc::vec![1, 2]);
        // Made already: `make` is not called again.
        assert_eq!(kept.get_or_try_make(&spares, || unreachable!()).unwrap(), &alloc::vec![1, 2]);
        assert_eq!(kept.take(), Some(alloc::vec![1, 2]));
        assert!(kept.get().is_none() && kept.take().is_none());
        // A failed make keeps nothing.
        let failed = kept.get_or_try_make(&spares, || Err(crate::error::Error::Backend("no".into())));
        assert!(failed.is_err() && kept.get().is_none());
    }

    #[test]
    fn spares_hand_back_what_fits_and_free_what_they_cannot_keep() {
        let spares = Spares::<Vec<u8>>::default();
        assert!(spares.take(|_| true).is_none());
        for n in 0..SPARES + 2 {
            spares.put(alloc::vec![0; n]);
        }
        // The first SPARES were kept; a take skips those that do not fit and keeps them.
        assert_eq!(spares.take(|v| v.len() == 2), Some(alloc::vec![0; 2]));
        assert!(spares.take(|v| v.len() == SPARES).is_none());
        let mut rest: Vec<usize> = core::iter::from_fn(|| spares.take(|_| true)).map(|v| v.len()).collect();
        rest.sort_unstable();
        assert_eq!(rest, (0..SPARES).filter(|&n| n != 2).collect::<Vec<_>>());
    }

    #[test]
    fn a_frame_buffer_is_a_spare_of_its_size_or_a_new_one() {
        let spares = Spares::<Image<f32>>::default();
        let mut used = Image::<f32>::new(4, 3).unwrap();
        used.row_mut(1)[2] = 7.0;
        spares.put(used);
        assert_eq!(spares.frame((5, 3)).unwrap().size(), (5, 3));
        // The 4 x 3 spare stayed through the take that did not fit it.
        let again = spares.frame((4, 3)).unwrap();
        assert_eq!(again.row(1)[2], 7.0);
        assert!(spares.take(|_| true).is_none());
    }

    #[cfg(feature = "std")]
    #[test]
    fn threads_making_one_kept_value_at_once_keep_the_first_and_spare_the_others() {
        extern crate std;
        let spares = Spares::<Vec<u8>>::default();
        let kept = Kept::<Vec<u8>>::default();
        let barrier = std::sync::Barrier::new(4);
        let made = core::sync::atomic::AtomicUsize::new(0);
        let seen: Vec<Vec<u8>> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4u8)
                .map(|t| {
                    let (kept, spares, barrier, made) = (&kept, &spares, &barrier, &made);
                    s.spawn(move || {
                        barrier.wait();
                        let make = || {
                            made.fetch_add(1, Ordering::Relaxed);
                            Ok(alloc::vec![t])
                        };
                        kept.get_or_try_make(spares, make).unwrap().clone()
                    })
                })
                .collect();
            threads.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // Every thread saw the one value kept; each other value made went to the spares.
        assert!(seen.iter().all(|v| Some(v) == kept.get()));
        let spared = core::iter::from_fn(|| spares.take(|_| true)).count();
        assert_eq!(spared, made.load(Ordering::Relaxed) - 1);
    }
}
