//! Scratch memory kept between calls.
//!
//! A pipeline that needs large temporary buffers (the SGM half-volumes of summed path
//! costs, tens of megabytes) would otherwise get fresh pages from the system on every
//! call and pay a page fault per 4 KiB on first touch, a tenth of the run time on a
//! 450 x 375 image. A [`Workspace`] hands out vectors it kept from earlier calls instead
//! and takes them back afterwards, holding at most its byte limit so that a long-lived
//! owner (a backend in an ImageJ session) does not pin the memory of its largest call.
//!
//! [`crate::CpuBackend`] owns one; a call that finds it busy (another thread is using the
//! same backend) works with a fresh one, so the cache never serializes callers.

use crate::error::{Error, Result};
use alloc::vec::Vec;

/// Element types a [`Workspace`] keeps vectors of.
pub trait Scratch: Copy + Send + 'static {
    #[doc(hidden)]
    fn pool(ws: &mut Workspace) -> &mut Vec<Vec<Self>>;
}

macro_rules! scratch {
    ($($t:ty => $field:ident),*) => {
        /// Vectors kept for reuse, per element type, and the limit on the bytes they hold.
        #[derive(Debug)]
        pub struct Workspace {
            $($field: Vec<Vec<$t>>,)*
            limit_bytes: usize,
        }
        impl Workspace {
            /// An empty workspace that keeps at most `limit_bytes` between calls.
            pub const fn new(limit_bytes: usize) -> Self {
                Workspace { $($field: Vec::new(),)* limit_bytes }
            }
            /// Bytes held by the kept vectors (their capacities).
            pub fn held_bytes(&self) -> usize {
                0 $(+ self.$field.iter().map(|v| v.capacity() * core::mem::size_of::<$t>()).sum::<usize>())*
            }
            /// Frees every kept vector.
            pub fn clear(&mut self) {
                $(self.$field = Vec::new();)*
            }
        }
        $(impl Scratch for $t {
            fn pool(ws: &mut Workspace) -> &mut Vec<Vec<$t>> {
                &mut ws.$field
            }
        })*
    };
}

scratch!(u8 => u8s, u16 => u16s, u32 => u32s, u64 => u64s, f32 => f32s);

/// What a workspace keeps unless told otherwise: enough for the SGM volumes of a
/// 1024 x 440 pair at 128 disparities.
pub const DEFAULT_LIMIT_BYTES: usize = 256 << 20;

impl Default for Workspace {
    fn default() -> Self {
        Workspace::new(DEFAULT_LIMIT_BYTES)
    }
}

impl Workspace {
    /// An empty vector with room for at least `capacity` elements: the smallest kept one
    /// that is large enough, else a new allocation ([`Error::OutOfMemory`] where the
    /// allocator refuses).
    pub fn vec_with_capacity<T: Scratch>(&mut self, capacity: usize) -> Result<Vec<T>> {
        let pool = T::pool(self);
        let best = pool.iter().enumerate().filter(|(_, v)| v.capacity() >= capacity).min_by_key(|(_, v)| v.capacity()).map(|(i, _)| i);
        match best {
            Some(i) => {
                let mut v = pool.swap_remove(i);
                v.clear();
                Ok(v)
            }
            None => {
                let mut v = Vec::new();
                v.try_reserve_exact(capacity).map_err(|_| Error::OutOfMemory { bytes: capacity.saturating_mul(core::mem::size_of::<T>()) })?;
                Ok(v)
            }
        }
    }

    /// `len` copies of `value`, in a kept vector when one is large enough.
    pub fn vec_filled<T: Scratch>(&mut self, len: usize, value: T) -> Result<Vec<T>> {
        let mut v = self.vec_with_capacity(len)?;
        v.resize(len, value);
        Ok(v)
    }

    /// Keeps `v` for later calls, unless that would make the workspace hold more than its
    /// limit (then `v` is freed).
    pub fn recycle<T: Scratch>(&mut self, v: Vec<T>) {
        let bytes = v.capacity() * core::mem::size_of::<T>();
        if v.capacity() > 0 && self.held_bytes() + bytes <= self.limit_bytes {
            T::pool(self).push(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_the_best_fitting_vector() {
        let mut ws = Workspace::new(1 << 20);
        let a: Vec<u16> = ws.vec_filled(1000, 7).unwrap();
        let pa = a.as_ptr();
        let b: Vec<u16> = ws.vec_filled(100, 1).unwrap();
        let pb = b.as_ptr();
        ws.recycle(a);
        ws.recycle(b);
        assert_eq!(ws.held_bytes(), 2 * 1000 + 2 * 100);
        // The smaller kept vector fits 50 elements; the larger one serves 500.
        let c: Vec<u16> = ws.vec_filled(50, 3).unwrap();
        assert_eq!((c.as_ptr(), c.len()), (pb, 50));
        assert!(c.iter().all(|&x| x == 3));
        let d: Vec<u16> = ws.vec_with_capacity(500).unwrap();
        assert_eq!((d.as_ptr(), d.len()), (pa, 0));
        // Nothing kept is large enough: a new allocation.
        let e: Vec<u16> = ws.vec_with_capacity(5000).unwrap();
        assert!(e.capacity() >= 5000);
        assert_eq!(ws.held_bytes(), 0);
        // Types have separate pools.
        ws.recycle(alloc::vec![0f32; 10]);
        let f: Vec<u8> = ws.vec_with_capacity(10).unwrap();
        assert_eq!(f.capacity(), 10);
        assert_eq!(ws.held_bytes(), 40);
    }

    #[test]
    fn holds_at_most_its_limit() {
        let mut ws = Workspace::new(1000);
        ws.recycle(alloc::vec![0u8; 600]);
        ws.recycle(alloc::vec![0u8; 600]);
        assert_eq!(ws.held_bytes(), 600);
        ws.recycle(alloc::vec![0u16; 200]);
        assert_eq!(ws.held_bytes(), 1000);
        ws.clear();
        assert_eq!(ws.held_bytes(), 0);
    }
}
