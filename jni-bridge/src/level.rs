//! One level of an OME-TIFF pyramid kept in memory while the full-resolution mosaic streams
//! past in strips: level `k` is the mosaic halved `k` times by the writer's own 2x2 mean
//! ([`tessera::pyramid::halve`]), so it equals the file's level `k` pixel for
//! pixel. Strips may have any height: each halving stage keeps back an odd last row until
//! the next strip pairs it, and [`Level::finish`] halves the rows still kept back alone,
//! as the writer treats a level's odd last row.

use tessera::pyramid::{halve, Sample};
use tessera_core::{AnyImage, AnyView, Image, ImageView, Pixel, Rgba8};

/// The halving stages of one sample type: `widths[j]` is stage `j`'s width, `kept[j]` its
/// unpaired row, `out` the rows of level `k = widths.len()`.
struct Stages<T> {
    widths: Vec<usize>,
    spp: usize,
    kept: Vec<Vec<T>>,
    out: Vec<T>,
}

impl<T: Sample> Stages<T> {
    fn new(width: usize, k: usize, spp: usize) -> Self {
        let widths = (0..k).scan(width, |w, _| Some(std::mem::replace(w, w.div_ceil(2)))).collect();
        Stages { widths, spp, kept: vec![Vec::new(); k], out: Vec::new() }
    }

    /// Whole rows of stage `j`.
    fn feed(&mut self, j: usize, rows: Vec<T>) {
        if j == self.widths.len() {
            self.out.extend(rows);
            return;
        }
        let row = self.widths[j] * self.spp;
        let mut buf = std::mem::take(&mut self.kept[j]);
        buf.extend(rows);
        let pairs = buf.len() / row / 2;
        self.kept[j] = buf.split_off(pairs * 2 * row);
        if pairs > 0 {
            let half = halve(&buf, self.widths[j], pairs * 2, self.spp);
            self.feed(j + 1, half);
        }
    }

    fn finish(&mut self) -> Vec<T> {
        for j in 0..self.widths.len() {
            let last = std::mem::take(&mut self.kept[j]);
            if !last.is_empty() {
                let half = halve(&last, self.widths[j], 1, self.spp);
                self.feed(j + 1, half);
            }
        }
        std::mem::take(&mut self.out)
    }
}

enum Body {
    U8(Stages<u8>),
    U16(Stages<u16>),
    F32(Stages<f32>),
    /// RGBA as four u8 samples: each colour is halved as the writer halves its RGB (the
    /// alpha, which the file drops, is halved too and set opaque at the end).
    Rgba8(Stages<u8>),
}

/// Level `k` of a `size` image of `like`'s type, built from its strips in order.
pub struct Level {
    size: (usize, usize),
    body: Body,
}

impl Level {
    pub fn new(like: &AnyView<'_>, size: (usize, usize), k: usize) -> Self {
        let w = size.0;
        let body = match like {
            AnyView::U8(_) => Body::U8(Stages::new(w, k, 1)),
            AnyView::U16(_) => Body::U16(Stages::new(w, k, 1)),
            AnyView::F32(_) => Body::F32(Stages::new(w, k, 1)),
            AnyView::Rgba8(_) => Body::Rgba8(Stages::new(w, k, 4)),
        };
        let size = (0..k).fold(size, |(w, h), _| (w.div_ceil(2), h.div_ceil(2)));
        Level { size, body }
    }

    /// The level's size.
    pub fn size(&self) -> (usize, usize) {
        self.size
    }

    /// The next rows of the full-resolution image (a strip of the same type, full width).
    pub fn push(&mut self, strip: &AnyView<'_>) {
        fn rows<T: Pixel>(v: &ImageView<'_, T>) -> Vec<T> {
            v.rows().flat_map(|r| r.iter().copied()).collect()
        }
        match (&mut self.body, strip) {
            (Body::U8(s), AnyView::U8(v)) => s.feed(0, rows(v)),
            (Body::U16(s), AnyView::U16(v)) => s.feed(0, rows(v)),
            (Body::F32(s), AnyView::F32(v)) => s.feed(0, rows(v)),
            (Body::Rgba8(s), AnyView::Rgba8(v)) => s.feed(0, v.rows().flatten().flat_map(|p| [p.r, p.g, p.b, p.a]).collect()),
            _ => unreachable!("a strip of another type than the level's"),
        }
    }

    /// The level, once every strip was pushed.
    pub fn finish(mut self) -> tessera_core::Result<AnyImage> {
        let (w, h) = self.size;
        Ok(match &mut self.body {
            Body::U8(s) => AnyImage::U8(Image::from_vec(w, h, s.finish())?),
            Body::U16(s) => AnyImage::U16(Image::from_vec(w, h, s.finish())?),
            Body::F32(s) => AnyImage::F32(Image::from_vec(w, h, s.finish())?),
            Body::Rgba8(s) => {
                let px = s.finish().chunks_exact(4).map(|c| Rgba8 { r: c[0], g: c[1], b: c[2], a: 255 }).collect();
                AnyImage::Rgba8(Image::from_vec(w, h, px)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pushed in strips of any heights, level k equals k whole-image halvings.
    #[test]
    fn strips_of_any_height_give_the_whole_images_halving() {
        let (w, h) = (37, 29);
        let px: Vec<u16> = (0..w * h).map(|i| ((i * 7919) % 65521) as u16).collect();
        let img = Image::from_vec(w, h, px.clone()).unwrap();
        for k in 0..4 {
            let mut want = (px.clone(), w, h);
            for _ in 0..k {
                want = (halve(&want.0, want.1, want.2, 1), want.1.div_ceil(2), want.2.div_ceil(2));
            }
            for step in [1, 3, 8, h] {
                let any = AnyImage::U16(img.clone());
                let v = any.view().unwrap();
                let mut level = Level::new(&v, (w, h), k);
                for y in (0..h).step_by(step) {
                    level.push(&tessera::ome_tiff::rows_of(&v, y, step.min(h - y)).unwrap());
                }
                assert_eq!(level.size(), (want.1, want.2));
                match level.finish().unwrap() {
                    AnyImage::U16(got) => assert_eq!(got.as_slice(), &want.0[..], "k {k}, strips of {step}"),
                    _ => panic!("type"),
                }
            }
        }
    }
}
