//! Where `tessera stitch` reads its frames: files or the pages of a multi-page TIFF,
//! decoded when the run asks for them (kept in a bounded cache), or the demo sequence cut
//! on demand.
//! A file that does not decode is not an error here: the run skips that frame with the
//! decoder's message and goes on.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tessera::stitch::{Frame, FrameRecord, FrameSource};
use tessera::AnyImage;

/// Image files, decoded on demand.
pub struct Files(pub Vec<PathBuf>);

impl FrameSource for Files {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn frame(&self, i: usize) -> Result<Frame<'_>, String> {
        load(self.0.get(i).ok_or_else(|| format!("no frame {i}"))?)
    }
}

/// An image file as a frame, or the decoder's message.
pub fn load(path: &Path) -> Result<Frame<'static>, String> {
    tessera::io::load(path).map(Frame::Image).map_err(|e| format!("{e:#}"))
}

/// The pages of a multi-page TIFF, each decoded on demand.
pub struct TiffPages {
    pub path: PathBuf,
    pub pages: usize,
}

impl FrameSource for TiffPages {
    fn len(&self) -> usize {
        self.pages
    }
    fn frame(&self, i: usize) -> Result<Frame<'_>, String> {
        tessera::io::load_tiff_page(&self.path, i).map(Frame::Image).map_err(|e| format!("{e:#}"))
    }
}

/// A source whose frames are made on each read (decoded, cut), with the frames it made kept
/// while they fit in `budget` bytes: a short sequence is decoded once, a long one keeps a
/// bounded amount of memory and decodes the rest again when the composite pastes them.
pub struct Cached<S> {
    inner: S,
    kept: RefCell<Vec<Option<Arc<AnyImage>>>>,
    used: Cell<usize>,
    budget: usize,
}

impl<S: FrameSource> Cached<S> {
    pub fn new(inner: S, budget: usize) -> Self {
        Cached { inner, kept: RefCell::new(Vec::new()), used: Cell::new(0), budget }
    }
}

impl<S: FrameSource> FrameSource for Cached<S> {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn frame(&self, i: usize) -> Result<Frame<'_>, String> {
        if let Some(Some(f)) = self.kept.borrow().get(i) {
            return Ok(Frame::Shared(Arc::clone(f)));
        }
        let made = match self.inner.frame(i)? {
            Frame::Image(img) => Arc::new(img),
            other => return Ok(other),
        };
        let bytes = image_bytes(&made);
        if self.used.get() + bytes <= self.budget {
            self.used.set(self.used.get() + bytes);
            // Grown on demand: a live source's length is not known up front.
            let mut kept = self.kept.borrow_mut();
            if kept.len() <= i {
                kept.resize(i + 1, None);
            }
            kept[i] = Some(Arc::clone(&made));
        }
        Ok(Frame::Shared(made))
    }
    fn recorded(&self, records: &[FrameRecord]) {
        self.inner.recorded(records)
    }
    fn ready(&self) -> usize {
        self.inner.ready()
    }
}

fn image_bytes(img: &AnyImage) -> usize {
    let (w, h) = img.size();
    let per_pixel = match img {
        AnyImage::U8(_) => 1,
        AnyImage::U16(_) => 2,
        AnyImage::U32(_) | AnyImage::F32(_) | AnyImage::Rgba8(_) => 4,
    };
    w * h * per_pixel
}

/// The process's peak resident memory in MiB (Linux), for the report.
pub fn peak_memory_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: f64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera::Image;

    /// Counts the frames it makes.
    struct Counting(Cell<usize>);

    impl FrameSource for Counting {
        fn len(&self) -> usize {
            4
        }
        fn frame(&self, _: usize) -> Result<Frame<'_>, String> {
            self.0.set(self.0.get() + 1);
            Ok(Frame::Image(AnyImage::U8(Image::filled(10, 10, 1).unwrap())))
        }
    }

    #[test]
    fn the_cache_keeps_what_fits_and_makes_the_rest_again() {
        // Room for two 100-byte frames.
        let c = Cached::new(Counting(Cell::new(0)), 250);
        for _ in 0..2 {
            for i in 0..4 {
                let f = c.frame(i).unwrap();
                assert_eq!(f.view().unwrap().size(), (10, 10));
            }
        }
        assert_eq!(c.inner.0.get(), 4 + 2);
        assert_eq!(c.used.get(), 200);
    }
}
