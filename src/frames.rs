//! Where a stitching run reads its frames: the files the inputs name (files, directories in
//! natural order, glob patterns) or the pages of a multi-page TIFF, decoded when the run
//! asks for them (kept in a bounded cache), as `tessera stitch` and the Python package's
//! `stitch` read them.
//! A file that does not decode is not an error here: the run skips that frame with the
//! decoder's message and goes on.

use crate::stitch::{Frame, FrameRecord, FrameSource};
use crate::{AnyImage, Parallelism};
use anyhow::{bail, Context, Result};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

/// Image files, decoded on demand.
pub struct Files(pub Vec<PathBuf>);

impl FrameSource for Files {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn frame(&self, i: usize) -> Result<Frame<'_>, String> {
        load(self.0.get(i).ok_or_else(|| format!("no frame {i}"))?)
    }
    fn shape(&self, i: usize) -> Result<((usize, usize), &'static str), String> {
        let path = self.0.get(i).ok_or_else(|| format!("no frame {i}"))?;
        match crate::io::tiff_shape(path) {
            Some(shape) => Ok(shape),
            None => load(path)?.shape(),
        }
    }
}

/// An image file as a frame, or the decoder's message.
pub fn load(path: &Path) -> Result<Frame<'static>, String> {
    crate::io::load(path).map(Frame::Image).map_err(|e| format!("{e:#}"))
}

/// Frames `start..start + len` of another source, as frames `0..len`: one block of a
/// source that holds several (the channels and time points of a tile grid).
pub struct Block<'a> {
    pub inner: &'a dyn FrameSource,
    pub start: usize,
    pub len: usize,
}

impl FrameSource for Block<'_> {
    fn len(&self) -> usize {
        self.len.min(self.inner.len().saturating_sub(self.start))
    }
    fn frame(&self, i: usize) -> std::result::Result<Frame<'_>, String> {
        if i >= self.len {
            return Err(format!("frame {i} of a block of {}", self.len));
        }
        self.inner.frame(self.start + i)
    }
    fn shape(&self, i: usize) -> std::result::Result<((usize, usize), &'static str), String> {
        if i >= self.len {
            return Err(format!("frame {i} of a block of {}", self.len));
        }
        self.inner.shape(self.start + i)
    }
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
        crate::io::load_tiff_page(&self.path, i).map(Frame::Image).map_err(|e| format!("{e:#}"))
    }
}

/// A tile grid's planes stored one file per tile: each file a multi-page TIFF (an OME-TIFF
/// from the microscope) of `planes` pages, channel by channel within each time point (the
/// XYCZT order). Frame `b * n + j` is page `b` of file `j`, so the frames come in blocks of
/// one plane each, as `--channels` and `--time-points` take them.
pub struct PagesPerTile {
    pub files: Vec<PathBuf>,
    pub planes: usize,
}

impl FrameSource for PagesPerTile {
    fn len(&self) -> usize {
        self.files.len() * self.planes
    }
    fn frame(&self, i: usize) -> Result<Frame<'_>, String> {
        let n = self.files.len();
        let file = self.files.get(i % n.max(1)).filter(|_| i < self.len()).ok_or_else(|| format!("no frame {i}"))?;
        crate::io::load_tiff_page(file, i / n).map(Frame::Image).map_err(|e| format!("{e:#}"))
    }
}

/// The frames of a tile grid of `planes` planes (channels times time points) from `files`:
/// tiles stored one multi-page TIFF per tile with every plane ([`PagesPerTile`]) when the
/// first of several files is a TIFF of exactly `planes` pages, otherwise as
/// [`frame_source`] reads them (the planes as blocks of files, or the pages of one TIFF),
/// with a label per frame. Errors: a file of the tiles' planes whose pages are not
/// `planes`, as [`frame_source`]. `read_ahead`: frames decoded ahead ([`ReadAhead`]).
pub fn grid_source(files: &[PathBuf], planes: usize, cache_bytes: usize, read_ahead: usize) -> Result<(Box<dyn FrameSource>, Vec<String>)> {
    let per_tile = planes > 1 && files.len() > 1 && crate::io::is_tiff(&files[0]) && crate::io::tiff_pages(&files[0]).is_ok_and(|p| p == planes);
    if !per_tile {
        return frame_source(files, cache_bytes, read_ahead);
    }
    for f in &files[1..] {
        let pages = crate::io::tiff_pages(f).unwrap_or(0);
        if pages != planes {
            bail!("{} has {pages} pages, {} has {planes}: every tile's file must hold the same planes (channels x time points)", f.display(), files[0].display());
        }
    }
    let labels = (0..planes).flat_map(|b| files.iter().map(move |f| format!("{}#{b}", f.display()))).collect();
    Ok((Box::new(Cached::new(ReadAhead::new(PagesPerTile { files: files.to_vec(), planes }, read_ahead), cache_bytes)), labels))
}

/// A source whose next frames are decoded on the thread pool while the run works on the
/// ones it has: each read of frame `i` right after frame `i - 1` (a sequence read in order,
/// to register and again to paste) starts frames `i + 1 ..= i + depth` that are not started
/// yet, and a started frame is handed over when the run asks for it. Decoding a PAL PNG
/// costs several times a pair's registration; read in order on the run's thread, it would
/// be the run's serial part. A frame still queued when asked for is decoded by the asker
/// (nothing waits on a pool that may be busy with the asker's own work); one being decoded
/// is waited for. Frames come out as the inner source makes them, errors included, so a run
/// reads the same frames whatever the depth (0: no read-ahead). Out-of-order reads (an
/// earlier keyframe read again) start nothing.
pub struct ReadAhead<S> {
    shared: Arc<Ahead<S>>,
    depth: usize,
    last: Mutex<Option<usize>>,
}

struct Ahead<S> {
    inner: S,
    started: Mutex<HashMap<usize, Arc<Started>>>,
}

/// A frame started ahead: its state, and the signal that it was decoded.
#[derive(Default)]
struct Started {
    state: Mutex<Decoding>,
    done: Condvar,
}

#[derive(Default)]
enum Decoding {
    #[default]
    Queued,
    Running,
    /// The inner source's frame, owned; `None` where it lent a view or panicked (read it
    /// again).
    Done(Option<Result<AnyImage, String>>),
    /// Taken by the run before a pool thread got to it.
    Claimed,
}

impl<S: FrameSource + Send + Sync + 'static> ReadAhead<S> {
    pub fn new(inner: S, depth: usize) -> Self {
        ReadAhead { shared: Arc::new(Ahead { inner, started: Mutex::new(HashMap::new()) }), depth, last: Mutex::new(None) }
    }

    /// Starts frames `from ..= from + depth - 1` (those below `len()` not started yet) on
    /// the pool, and forgets started frames below `from - 1` (read past).
    fn start_from(&self, from: usize) {
        let end = (from + self.depth).min(self.shared.inner.len());
        let mut started = self.shared.started.lock().unwrap_or_else(|e| e.into_inner());
        started.retain(|&j, _| j + 1 >= from);
        for j in from..end {
            if started.contains_key(&j) {
                continue;
            }
            let slot = Arc::new(Started::default());
            started.insert(j, Arc::clone(&slot));
            let shared = Arc::clone(&self.shared);
            rayon::spawn(move || {
                {
                    let mut state = slot.state.lock().unwrap_or_else(|e| e.into_inner());
                    if !matches!(*state, Decoding::Queued) {
                        return;
                    }
                    *state = Decoding::Running;
                }
                // A panic here would abort the process (a pool task has no caller): the run
                // reads such a frame itself instead, and meets the panic as it used to.
                let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match shared.inner.frame(j) {
                    Ok(Frame::Image(image)) => Some(Ok(image)),
                    Ok(Frame::Shared(image)) => Some(Ok(Arc::unwrap_or_clone(image))),
                    Ok(Frame::View(_)) => None,
                    Err(why) => Some(Err(why)),
                }))
                .unwrap_or(None);
                *slot.state.lock().unwrap_or_else(|e| e.into_inner()) = Decoding::Done(made);
                slot.done.notify_all();
            });
        }
    }

    /// Frame `i` if it was started ahead and not claimed: waited for if a pool thread is
    /// decoding it; `None` where the run must read it itself.
    fn take_started(&self, i: usize) -> Option<Result<AnyImage, String>> {
        let slot = self.shared.started.lock().unwrap_or_else(|e| e.into_inner()).remove(&i)?;
        let mut state = slot.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match std::mem::replace(&mut *state, Decoding::Claimed) {
                Decoding::Queued | Decoding::Claimed => return None,
                Decoding::Done(made) => return made,
                Decoding::Running => {
                    *state = Decoding::Running;
                    state = slot.done.wait(state).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }
}

impl<S: FrameSource + Send + Sync + 'static> FrameSource for ReadAhead<S> {
    fn len(&self) -> usize {
        self.shared.inner.len()
    }
    fn frame(&self, i: usize) -> Result<Frame<'_>, String> {
        let in_order = {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            let in_order = last.map_or(true, |l| i == l + 1);
            *last = Some(i);
            in_order
        };
        if in_order && self.depth > 0 {
            self.start_from(i + 1);
        }
        match self.take_started(i) {
            Some(made) => made.map(Frame::Image),
            None => self.shared.inner.frame(i),
        }
    }
    fn shape(&self, i: usize) -> Result<((usize, usize), &'static str), String> {
        self.shared.inner.shape(i)
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
    fn shape(&self, i: usize) -> Result<((usize, usize), &'static str), String> {
        if let Some(Some(f)) = self.kept.borrow().get(i) {
            return Frame::Shared(Arc::clone(f)).shape();
        }
        self.inner.shape(i)
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

/// The frames the inputs name, as a source the run reads on demand, and a label per frame
/// (file name, or file name and page): one multi-page TIFF gives its pages, otherwise one
/// frame per file; each decoded when the run needs it (the next `read_ahead` on the thread
/// pool, [`ReadAhead`]) and kept in a cache of `cache_bytes`.
pub fn frame_source(files: &[PathBuf], cache_bytes: usize, read_ahead: usize) -> Result<(Box<dyn FrameSource>, Vec<String>)> {
    if let [one] = files {
        let pages = if crate::io::is_tiff(one) { crate::io::tiff_pages(one)? } else { 1 };
        if pages > 1 {
            let labels = (0..pages).map(|i| format!("{}#{i}", one.display())).collect();
            let source = TiffPages { path: one.clone(), pages };
            return Ok((Box::new(Cached::new(ReadAhead::new(source, read_ahead), cache_bytes)), labels));
        }
    }
    let labels = files.iter().map(|f| f.display().to_string()).collect();
    Ok((Box::new(Cached::new(ReadAhead::new(Files(files.to_vec()), read_ahead), cache_bytes)), labels))
}

/// Frames a source decodes ahead ([`ReadAhead`]) for a run on `par`'s threads: none on one
/// thread (its frames are decoded in order on it), else twice the threads, at most 8 (two
/// windows of pairs; a frame waiting costs its memory).
pub fn read_ahead_depth(par: Parallelism) -> usize {
    match par.threads() {
        0 | 1 => 0,
        n => (2 * n).min(8),
    }
}

/// Natural order: digit runs compare as numbers ("f2" < "f10").
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut x, mut y) = (a.chars().peekable(), b.chars().peekable());
    loop {
        match (x.peek().copied(), y.peek().copied()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, _) => return std::cmp::Ordering::Less,
            (_, None) => return std::cmp::Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let take = |it: &mut std::iter::Peekable<std::str::Chars<'_>>| {
                    let mut s = String::new();
                    while let Some(c) = it.peek().copied().filter(char::is_ascii_digit) {
                        s.push(c);
                        it.next();
                    }
                    s
                };
                let (p, q) = (take(&mut x), take(&mut y));
                let (pt, qt) = (p.trim_start_matches('0'), q.trim_start_matches('0'));
                let o = pt.len().cmp(&qt.len()).then_with(|| pt.cmp(qt)).then_with(|| p.len().cmp(&q.len()));
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(&d);
                }
                x.next();
                y.next();
            }
        }
    }
}

/// `*` and `?` wildcard match of a whole file name.
fn wildcard(pattern: &[char], name: &[char]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some('*'), _) => wildcard(&pattern[1..], name) || (!name.is_empty() && wildcard(pattern, &name[1..])),
        (Some('?'), Some(_)) => wildcard(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => wildcard(&pattern[1..], &name[1..]),
        _ => false,
    }
}

const IMAGE_EXTENSIONS: [&str; 8] = ["png", "tif", "tiff", "jpg", "jpeg", "pgm", "ppm", "pnm"];

/// Whether a file's extension is one the decoders read (PNG, TIFF, JPEG, PGM/PPM/PNM).
pub fn is_image_name(p: &Path) -> bool {
    p.extension().and_then(|e| e.to_str()).is_some_and(|e| IMAGE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

fn sorted_files(dir: &Path, keep: impl Fn(&Path) -> bool) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && keep(p))
        .collect();
    files.sort_by(|a, b| natural_cmp(&a.to_string_lossy(), &b.to_string_lossy()));
    Ok(files)
}

/// The frame files the inputs name: files as given, directories (their image files in
/// natural order), and glob patterns in the last path component (`*`, `?`).
pub fn resolve_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for input in inputs {
        let s = input.to_string_lossy();
        if input.is_dir() {
            let files = sorted_files(input, is_image_name)?;
            if files.is_empty() {
                bail!("directory {} holds no image files ({})", input.display(), IMAGE_EXTENSIONS.join(", "));
            }
            out.extend(files);
        } else if !input.exists() && (s.contains('*') || s.contains('?')) {
            let dir = input.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let pattern: Vec<char> = input.file_name().map(|n| n.to_string_lossy().chars().collect()).unwrap_or_default();
            let files = sorted_files(dir, |p| {
                p.file_name().is_some_and(|n| wildcard(&pattern, &n.to_string_lossy().chars().collect::<Vec<_>>()))
            })?;
            if files.is_empty() {
                bail!("pattern {} matches no file", input.display());
            }
            out.extend(files);
        } else if input.exists() {
            out.push(input.clone());
        } else {
            bail!("{}: no such file or directory", input.display());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Image;

    /// Frames made on demand (a grey level per index; every fifth one fails), counting how
    /// often each is made.
    struct Counted {
        made: Vec<std::sync::atomic::AtomicUsize>,
    }

    impl FrameSource for Counted {
        fn len(&self) -> usize {
            self.made.len()
        }
        fn frame(&self, i: usize) -> std::result::Result<Frame<'_>, String> {
            self.made[i].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if i % 5 == 3 {
                return Err(format!("frame {i} is corrupt"));
            }
            Ok(Frame::Image(AnyImage::U8(Image::filled(3, 2, i as u8).unwrap())))
        }
    }

    fn as_read(f: std::result::Result<Frame<'_>, String>) -> std::result::Result<AnyImage, String> {
        f.map(|f| match f {
            Frame::Image(i) => i,
            Frame::Shared(i) => (*i).clone(),
            Frame::View(_) => panic!("a view"),
        })
    }

    #[test]
    fn read_ahead_gives_the_inner_frames_and_errors_making_each_once_in_order() {
        let n = 23;
        for depth in [0, 1, 3, 8] {
            let source = ReadAhead::new(Counted { made: (0..n).map(|_| Default::default()).collect() }, depth);
            let plain = Counted { made: (0..n).map(|_| Default::default()).collect() };
            // In order (a run), then out of order (an earlier keyframe read again), then in
            // order again from the start (the composite).
            let order: Vec<usize> = (0..n).chain([4, 2, 17]).chain(0..n).collect();
            for &i in &order {
                assert_eq!(as_read(source.frame(i)), as_read(plain.frame(i)), "depth {depth}, frame {i}");
            }
            // Every frame started ahead was read, and each read made its frame once: on the
            // pool, or by the reader where it claimed a frame still queued.
            let made: Vec<usize> = source.shared.inner.made.iter().map(|m| m.load(std::sync::atomic::Ordering::SeqCst)).collect();
            let asked: Vec<usize> = plain.made.iter().map(|m| m.load(std::sync::atomic::Ordering::SeqCst)).collect();
            assert_eq!(made, asked, "depth {depth}");
            assert_eq!(source.len(), n);
        }
    }

    /// Frame 2 panics when made (counting the attempts); the others are blank.
    #[derive(Default)]
    struct Panicking {
        attempts: std::sync::atomic::AtomicUsize,
    }

    impl FrameSource for Panicking {
        fn len(&self) -> usize {
            6
        }
        fn frame(&self, i: usize) -> std::result::Result<Frame<'_>, String> {
            if i == 2 {
                self.attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                panic!("a decoder bug");
            }
            Ok(Frame::Image(AnyImage::U8(Image::filled(2, 2, i as u8).unwrap())))
        }
    }

    #[test]
    fn a_frame_that_panics_ahead_panics_for_the_reader_not_the_process() {
        let source = ReadAhead::new(Panicking::default(), 4);
        assert!(source.frame(0).is_ok());
        assert!(source.frame(1).is_ok());
        // Frame 2 was started ahead: let the pool meet its panic first.
        while source.shared.inner.attempts.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| source.frame(2).map(|_| ())));
        assert!(read.is_err(), "frame 2's panic reaches its reader");
        assert_eq!(as_read(source.frame(3)), Ok(AnyImage::U8(Image::filled(2, 2, 3).unwrap())));
    }

    #[test]
    fn read_ahead_depth_follows_the_threads() {
        assert_eq!(read_ahead_depth(Parallelism::Sequential), 0);
        let all = read_ahead_depth(Parallelism::AllThreads);
        assert!(all <= 8 && (rayon::current_num_threads() == 1) == (all == 0));
    }

    #[test]
    fn natural_order() {
        let mut v = vec!["f10.png", "f2.png", "f1.png", "f02.png", "g.png", "f100.png"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["f1.png", "f2.png", "f02.png", "f10.png", "f100.png", "g.png"]);
    }

    #[test]
    fn wildcards() {
        let m = |p: &str, n: &str| wildcard(&p.chars().collect::<Vec<_>>(), &n.chars().collect::<Vec<_>>());
        assert!(m("*.png", "a.png") && m("f??.tif", "f01.tif") && m("*", "") && m("a*b*c", "aXXbYc"));
        assert!(!m("*.png", "a.tif") && !m("f?.tif", "f01.tif") && !m("a*b", "ac"));
    }

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

    #[test]
    fn a_whole_uncompressed_tiff_tells_its_shape_from_its_header_and_others_are_decoded() {
        let dir = std::env::temp_dir().join(format!("tessera-frame-shapes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let images = [
            AnyImage::U8(Image::from_fn(37, 21, |x, y| (x * y) as u8).unwrap()),
            AnyImage::U16(Image::from_fn(40, 9, |x, y| (x * 900 + y) as u16).unwrap()),
            AnyImage::Rgba8(Image::from_fn(8, 13, |x, y| crate::Rgba8::new(x as u8, y as u8, 7, 255)).unwrap()),
            AnyImage::F32(Image::from_fn(6, 5, |x, y| x as f32 - y as f32).unwrap()),
        ];
        let mut files = Vec::new();
        for (k, img) in images.iter().enumerate() {
            let path = dir.join(format!("t{k}.tif"));
            crate::io::write_tiff(std::slice::from_ref(img), &path).unwrap();
            files.push(path);
        }
        // A copy cut short: its header promises strips beyond its end.
        let whole = std::fs::read(&files[1]).unwrap();
        let short = dir.join("short.tif");
        std::fs::write(&short, &whole[..whole.len() - 100]).unwrap();
        let png = dir.join("t.png");
        crate::io::save(&images[0], &png).unwrap();
        let source = Files(vec![files[0].clone(), files[1].clone(), files[2].clone(), files[3].clone(), short.clone(), png.clone()]);
        for (i, header) in [(0, true), (1, true), (2, true), (3, false), (4, false), (5, false)] {
            assert_eq!(crate::io::tiff_shape(&source.0[i]).is_some(), header, "file {i}");
            let decoded = source.frame(i).and_then(|f| f.shape());
            assert_eq!(source.shape(i), decoded, "file {i}");
        }
        assert!(source.shape(4).is_err(), "the short file is found unreadable");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
