//! Normalized cross-correlation template matching: the coefficient (with integral images
//! for the window statistics), the logarithmic search and the exhaustive search over a
//! square search area, and subpixel refinement of the peak.
//!
//! Positions are the top-left pixel of the window in the searched frame. A search covers
//! the positions within `radius` (Chebyshev distance) of a start position that keep the
//! window inside the frame.

pub(crate) mod coefficient;
pub(crate) mod exhaustive;
pub(crate) mod integral;
pub(crate) mod log_search;
pub(crate) mod subpixel;

pub use coefficient::{coefficient, NccSample, SearchFrame, Template, TemplateCut, TemplateStats, MAX_TEMPLATE};
pub use exhaustive::exhaustive_search;
pub use integral::{Integral, IntegralSample};
pub use log_search::{initial_step, log_search};
pub use subpixel::quadratic_peak;

use crate::error::{Error, Result};
use alloc::vec::Vec;
use coefficient::FLAT;

/// Largest search radius accepted (the per-search cache holds `(2 (r + 1) + 1)^2` entries).
pub const MAX_RADIUS: usize = 256;

/// Parameters shared by the searches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchParams {
    /// Search radius in pixels around the start position (0..=[`MAX_RADIUS`]); the original
    /// plugin's default is 32.
    pub radius: usize,
    /// Refine the peak to subpixel precision ([`quadratic_peak`]).
    pub subpixel: bool,
    /// Log search only: `Some(a)` makes it centre-biased ([`log_search`]): a local maximum
    /// next to the start with coefficient `>= a` ends the search. `None`: the plain
    /// logarithmic scheme. Default `Some(0.85)`, the registration's default cthresh.
    pub accept: Option<f64>,
}

impl Default for SearchParams {
    fn default() -> Self {
        SearchParams { radius: 32, subpixel: true, accept: Some(0.85) }
    }
}

/// The best match a search found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Match {
    /// Integer peak: top-left pixel of the best window.
    pub x: usize,
    pub y: usize,
    /// Its coefficient.
    pub coefficient: f64,
    /// Subpixel offset of the refined peak from `(x, y)`, each in `[-1, 1]` (zero without
    /// refinement).
    pub offset: (f64, f64),
    /// Coefficients computed (cache hits not counted), including the refinement's.
    pub evaluations: u32,
}

impl Match {
    /// The refined position `(x + offset.0, y + offset.1)`.
    pub fn position(&self) -> (f64, f64) {
        (self.x as f64 + self.offset.0, self.y as f64 + self.offset.1)
    }
}

/// The per-search cache of coefficients already computed (the original plugin's third
/// optimisation: a position is never evaluated twice). A bitmap marks the computed
/// positions of the `(2 (r + 1) + 1)^2` box around the start; only the bitmap is cleared
/// between searches. Reuse one per thread to avoid allocation per search.
#[derive(Clone, Debug, Default)]
pub struct SearchCache {
    side: usize,
    x0: isize,
    y0: isize,
    bits: Vec<u64>,
    values: Vec<f64>,
    evaluations: u32,
}

/// The positions a search may visit: `x0..=x1`, `y0..=y1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Area {
    pub x0: usize,
    pub x1: usize,
    pub y0: usize,
    pub y1: usize,
    /// Last valid window position in the frame (for the refinement's neighbours).
    pub xmax: usize,
    pub ymax: usize,
}

impl SearchCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Validates a search and prepares the cache around `start`; returns the area.
    pub(crate) fn begin<T: NccSample>(
        &mut self,
        frame: &SearchFrame<'_, T>,
        tpl: &Template<T>,
        start: (isize, isize),
        p: &SearchParams,
    ) -> Result<Area> {
        crate::error::require_range("search radius", p.radius, 0, MAX_RADIUS as i64)?;
        let (fw, fh) = frame.size();
        let (tw, th) = tpl.size();
        if tw == 0 || th == 0 {
            return Err(Error::InvalidParameter { name: "template", reason: "empty template".into() });
        }
        if tw > fw || th > fh {
            return Err(Error::InvalidParameter {
                name: "template",
                reason: alloc::format!("{tw}x{th} template is larger than the {fw}x{fh} frame"),
            });
        }
        let (xmax, ymax) = ((fw - tw) as isize, (fh - th) as isize);
        let r = p.radius as isize;
        let (sx, sy) = start;
        let (x0, x1) = (sx.saturating_sub(r).max(0), sx.saturating_add(r).min(xmax));
        let (y0, y1) = (sy.saturating_sub(r).max(0), sy.saturating_add(r).min(ymax));
        if x0 > x1 || y0 > y1 {
            return Err(Error::InvalidParameter {
                name: "search start",
                reason: alloc::format!("({sx}, {sy}) with radius {r} leaves no window position inside the frame"),
            });
        }
        let side = 2 * (p.radius + 1) + 1;
        self.side = side;
        self.x0 = sx - r - 1;
        self.y0 = sy - r - 1;
        let words = (side * side).div_ceil(64);
        self.bits.clear();
        self.bits.resize(words, 0);
        if self.values.len() < side * side {
            self.values.resize(side * side, 0.0);
        }
        self.evaluations = 0;
        Ok(Area {
            x0: x0 as usize,
            x1: x1 as usize,
            y0: y0 as usize,
            y1: y1 as usize,
            xmax: xmax as usize,
            ymax: ymax as usize,
        })
    }

    /// The coefficient at `(x, y)` (which the caller keeps inside the frame and within
    /// `radius + 1` of the start), computed once.
    #[inline]
    pub(crate) fn get<T: NccSample>(&mut self, frame: &SearchFrame<'_, T>, tpl: &Template<T>, x: usize, y: usize) -> f64 {
        let i = (y as isize - self.y0) as usize * self.side + (x as isize - self.x0) as usize;
        let (w, b) = (i / 64, 1u64 << (i % 64));
        if self.bits[w] & b != 0 {
            return self.values[i];
        }
        let v = frame.eval(tpl, x, y);
        self.bits[w] |= b;
        self.values[i] = v;
        self.evaluations += 1;
        v
    }

    /// Stores a coefficient computed outside [`SearchCache::get`] (the exhaustive search's
    /// row runs), counting it as evaluated.
    #[inline]
    pub(crate) fn put(&mut self, x: usize, y: usize, v: f64) {
        let i = (y as isize - self.y0) as usize * self.side + (x as isize - self.x0) as usize;
        let (w, b) = (i / 64, 1u64 << (i % 64));
        if self.bits[w] & b == 0 {
            self.bits[w] |= b;
            self.evaluations += 1;
        }
        self.values[i] = v;
    }

    /// Builds the [`Match`] for the integer peak `(x, y)`: `None` when its coefficient is
    /// flat, else with the subpixel offset from the 3 x 3 neighbourhood (neighbours outside
    /// the frame count as missing).
    pub(crate) fn finish<T: NccSample>(
        &mut self,
        frame: &SearchFrame<'_, T>,
        tpl: &Template<T>,
        area: &Area,
        (x, y): (usize, usize),
        subpixel: bool,
    ) -> Option<Match> {
        let best = self.get(frame, tpl, x, y);
        if best == FLAT {
            return None;
        }
        let mut offset = (0.0, 0.0);
        if subpixel {
            let mut v = [[FLAT; 3]; 3];
            for (j, row) in v.iter_mut().enumerate() {
                for (i, cell) in row.iter_mut().enumerate() {
                    let (xx, yy) = (x as isize + i as isize - 1, y as isize + j as isize - 1);
                    if xx >= 0 && yy >= 0 && xx as usize <= area.xmax && yy as usize <= area.ymax {
                        *cell = self.get(frame, tpl, xx as usize, yy as usize);
                    }
                }
            }
            offset = quadratic_peak(&v);
        }
        Some(Match { x, y, coefficient: best, offset, evaluations: self.evaluations })
    }
}
