//! The resolution pyramid of a tiled image written strip by strip (the OME-TIFF and
//! OME-Zarr writers): each level is its parent halved by a 2x2 mean, `ceil(w / 2) x
//! ceil(h / 2)` (an odd last column or row averages the pixels it has), until a level fits
//! in one tile. [`Pyramid`] keeps one row of tiles per level, hands each row to a
//! [`TileSink`] when it is full and passes it, halved, to the next level, so memory is about
//! two tile rows of the full width, whatever the height.

/// A sample type of a TIFF plane: its bits, its TIFF SampleFormat (1 unsigned integer,
/// 3 IEEE float), little-endian bytes and the mean of up to four samples.
pub trait Sample: Copy + Default + 'static {
    const BITS: u16;
    const FORMAT: u16;
    /// Appends `src` as little-endian bytes.
    fn extend_le(src: &[Self], out: &mut Vec<u8>);
    /// The mean of `n` (1 to 4) samples whose sum is `sum` (summed by [`Sample::widen`]),
    /// integers rounded half up.
    fn mean(sum: f64, n: u32) -> Self;
    fn widen(self) -> f64;
}

impl Sample for u8 {
    const BITS: u16 = 8;
    const FORMAT: u16 = 1;
    fn extend_le(src: &[Self], out: &mut Vec<u8>) {
        out.extend_from_slice(src);
    }
    fn mean(sum: f64, n: u32) -> Self {
        // Sums of at most four 8-bit values are exact in f64.
        ((sum as u32 + n / 2) / n) as u8
    }
    fn widen(self) -> f64 {
        self as f64
    }
}

impl Sample for u16 {
    const BITS: u16 = 16;
    const FORMAT: u16 = 1;
    fn extend_le(src: &[Self], out: &mut Vec<u8>) {
        out.extend(src.iter().flat_map(|v| v.to_le_bytes()));
    }
    fn mean(sum: f64, n: u32) -> Self {
        ((sum as u32 + n / 2) / n) as u16
    }
    fn widen(self) -> f64 {
        self as f64
    }
}

impl Sample for f32 {
    const BITS: u16 = 32;
    const FORMAT: u16 = 3;
    fn extend_le(src: &[Self], out: &mut Vec<u8>) {
        out.extend(src.iter().flat_map(|v| v.to_le_bytes()));
    }
    fn mean(sum: f64, n: u32) -> Self {
        (sum / n as f64) as f32
    }
    fn widen(self) -> f64 {
        self as f64
    }
}

/// The sizes of every level, full resolution first, each the previous halved (rounding
/// up) until one fits in a `tile x tile` tile.
pub fn level_sizes((w, h): (usize, usize), tile: usize) -> Vec<(usize, usize)> {
    let mut sizes = vec![(w, h)];
    let (mut w, mut h) = (w, h);
    while w > tile || h > tile {
        (w, h) = (w.div_ceil(2), h.div_ceil(2));
        sizes.push((w, h));
    }
    sizes
}

/// `rows` whole rows of `w` pixels of `spp` interleaved samples, halved by the 2x2 mean.
pub fn halve<T: Sample>(src: &[T], w: usize, rows: usize, spp: usize) -> Vec<T> {
    let (hw, hr) = (w.div_ceil(2), rows.div_ceil(2));
    let mut out = Vec::with_capacity(hw * hr * spp);
    for y in 0..hr {
        let ys = [2 * y, (2 * y + 1).min(rows - 1)];
        let ny = if ys[0] == ys[1] { 1 } else { 2 };
        for x in 0..hw {
            let xs = [2 * x, (2 * x + 1).min(w - 1)];
            let nx = if xs[0] == xs[1] { 1 } else { 2 };
            for c in 0..spp {
                let mut sum = 0.0;
                for &yy in &ys[..ny] {
                    for &xx in &xs[..nx] {
                        sum += src[(yy * w + xx) * spp + c].widen();
                    }
                }
                out.push(T::mean(sum, (nx * ny) as u32));
            }
        }
    }
    out
}

/// Where a [`Pyramid`] puts its tiles: the file format's side.
pub trait TileSink<T> {
    /// Row `row` of level `level`'s tiles, left to right, each `tile x tile` pixels of `spp`
    /// interleaved samples, row-major, padded with zeros past the level's right and bottom
    /// edges (both formats store whole tiles).
    fn tile_row(&mut self, level: usize, row: usize, tiles: Vec<Vec<T>>) -> std::io::Result<()>;
}

/// One level: its size, its buffered rows of the current tile row, the rows done before.
struct Level<T> {
    size: (usize, usize),
    buf: Vec<T>,
    rows: usize,
    done: usize,
}

/// Every level of one image (module doc).
pub struct Pyramid<T> {
    levels: Vec<Level<T>>,
    spp: usize,
    tile: usize,
}

impl<T: Sample> Pyramid<T> {
    /// An empty pyramid of levels `sizes` ([`level_sizes`]), `spp` samples a pixel.
    pub fn new(sizes: &[(usize, usize)], spp: usize, tile: usize) -> Self {
        let levels = sizes.iter().map(|&size| Level { size, buf: Vec::new(), rows: 0, done: 0 }).collect();
        Pyramid { levels, spp, tile }
    }

    /// Appends whole rows of the full-resolution image (rows top to bottom over successive
    /// calls): every tile row that fills, and the last one when a level's last row arrives,
    /// goes to `sink` and down to the next level.
    pub fn push(&mut self, rows: &[T], sink: &mut dyn TileSink<T>) -> std::io::Result<()> {
        self.push_level(0, rows, sink)
    }

    fn push_level(&mut self, k: usize, mut rows: &[T], sink: &mut dyn TileSink<T>) -> std::io::Result<()> {
        let row_len = self.levels[k].size.0 * self.spp;
        while !rows.is_empty() {
            let lvl = &mut self.levels[k];
            let take = ((self.tile - lvl.rows) * row_len).min(rows.len());
            lvl.buf.extend_from_slice(&rows[..take]);
            lvl.rows += take / row_len;
            rows = &rows[take..];
            if lvl.rows == self.tile || lvl.done + lvl.rows == lvl.size.1 {
                self.flush(k, sink)?;
            }
        }
        Ok(())
    }

    fn flush(&mut self, k: usize, sink: &mut dyn TileSink<T>) -> std::io::Result<()> {
        let (tile, spp) = (self.tile, self.spp);
        let lvl = &mut self.levels[k];
        let (w, rows) = (lvl.size.0, lvl.rows);
        let tiles = (0..w)
            .step_by(tile)
            .map(|x0| {
                let tw = tile.min(w - x0);
                let mut t = vec![T::default(); tile * tile * spp];
                for r in 0..rows {
                    let src = (r * w + x0) * spp;
                    t[r * tile * spp..(r * tile + tw) * spp].copy_from_slice(&lvl.buf[src..src + tw * spp]);
                }
                t
            })
            .collect();
        let row = lvl.done / tile;
        lvl.done += rows;
        lvl.rows = 0;
        let buf = std::mem::take(&mut lvl.buf);
        sink.tile_row(k, row, tiles)?;
        let half = if k + 1 < self.levels.len() { Some(halve(&buf, w, rows, spp)) } else { None };
        self.levels[k].buf = buf;
        self.levels[k].buf.clear();
        match half {
            Some(half) => self.push_level(k + 1, &half, sink),
            None => Ok(()),
        }
    }
}

/// A pyramid of any pixel layout the tiled writers store, with the row of RGB samples an
/// `Rgba8` strip is converted through (its alpha, the compositor's coverage, dropped).
pub struct AnyPyramid {
    levels: Levels,
    rgb: Vec<u8>,
}

enum Levels {
    U8(Pyramid<u8>),
    U16(Pyramid<u16>),
    F32(Pyramid<f32>),
}

impl AnyPyramid {
    /// An empty pyramid of `kind` pixels at level sizes `sizes`.
    pub fn new(kind: crate::ome_tiff::PixelKind, sizes: &[(usize, usize)], tile: usize) -> Self {
        use crate::ome_tiff::PixelKind;
        let levels = match kind {
            PixelKind::U8 => Levels::U8(Pyramid::new(sizes, 1, tile)),
            PixelKind::Rgb8 => Levels::U8(Pyramid::new(sizes, 3, tile)),
            PixelKind::U16 => Levels::U16(Pyramid::new(sizes, 1, tile)),
            PixelKind::F32 => Levels::F32(Pyramid::new(sizes, 1, tile)),
        };
        AnyPyramid { levels, rgb: Vec::new() }
    }

    /// Appends the rows of `strip` (of the pyramid's layout, checked by the writer before).
    pub fn push_strip<S: TileSink<u8> + TileSink<u16> + TileSink<f32>>(&mut self, strip: &tessera_core::AnyView<'_>, sink: &mut S) -> std::io::Result<()> {
        use tessera_core::AnyView;
        fn rows<T: Sample + tessera_core::Pixel>(p: &mut Pyramid<T>, v: &tessera_core::ImageView<'_, T>, sink: &mut dyn TileSink<T>) -> std::io::Result<()> {
            v.rows().try_for_each(|row| p.push(row, sink))
        }
        match (&mut self.levels, strip) {
            (Levels::U8(p), AnyView::U8(v)) => rows(p, v, sink),
            (Levels::U16(p), AnyView::U16(v)) => rows(p, v, sink),
            (Levels::F32(p), AnyView::F32(v)) => rows(p, v, sink),
            (Levels::U8(p), AnyView::Rgba8(v)) => v.rows().try_for_each(|row| {
                self.rgb.clear();
                self.rgb.extend(row.iter().flat_map(|px| [px.r, px.g, px.b]));
                p.push(&self.rgb, sink)
            }),
            _ => Err(std::io::Error::other("internal: a strip of another pixel type")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_halve_until_one_tile() {
        assert_eq!(level_sizes((100, 50), 256), vec![(100, 50)]);
        assert_eq!(level_sizes((1025, 300), 256), vec![(1025, 300), (513, 150), (257, 75), (129, 38)]);
    }

    #[test]
    fn the_mean_covers_odd_edges_and_rounds_half_up() {
        // 3 x 3 gray: the last column and row average what they have.
        let src: Vec<u8> = vec![0, 1, 10, 2, 4, 20, 7, 9, 255];
        assert_eq!(halve(&src, 3, 3, 1), vec![2, 15, 8, 255]);
        let rgb: Vec<u16> = vec![1, 2, 3, 3, 4, 5];
        assert_eq!(halve(&rgb, 2, 1, 3), vec![2, 3, 4]);
        let f: Vec<f32> = vec![0.5, 1.0, 2.0, 4.0];
        assert_eq!(halve(&f, 2, 2, 1), vec![1.875]);
    }
}
