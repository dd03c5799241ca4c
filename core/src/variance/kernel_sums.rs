//! Streaming kernel sums of `x` and `x^2`, the engine of `Recursive`: O(1) per pixel, no
//! intermediate image, for the tent and the box kernel ([`Shape`]).
//!
//! The tent of radius `R = B - 1` is, along each axis, a box of width `B` convolved with
//! itself, so `T(y) = sum_{t = y - R}^{y} A(t)` with `A(t) = sum_{a < B} X(t + a)`:
//!
//! - Vertically both boxes are running sums, vectorized across columns: `A` moves down by
//!   adding the entering row and subtracting the leaving one, and the column tent `C` by
//!   adding the new `A` row and subtracting the one from `B` rows before, kept in a ring of
//!   `B` rows (a few hundred KiB, in cache) instead of a whole intermediate image.
//! - Horizontally, along the row of column tents extended by the border rule, a double
//!   prefix sum `Q[i + 1] = Q[i] + P[i]`, `P[i] = sum_{u < i} V[u]`, gives each tent as a
//!   second difference: `T(x) = Q[x + 2B] - 2 Q[x + B] + Q[x]`.
//!
//! A box of width `n = 2r + 1` is one running sum vertically and one prefix difference
//! horizontally. Outside rows and columns come from the border rule applied to the
//! original image (outside columns of a row of column sums are the column sums of the
//! source column the rule names, or the constant times the vertical weight). Integer lanes
//! run in wrapping integers: every intermediate is exact modulo `2^n`, so the final sums
//! are exact as long as they fit, which the radius limits guarantee for u8 (u32 columns)
//! and u16 (u64 columns). f64 lanes use running boxes along rows as well (no prefix over a
//! whole row), so their rounding stays at the scale of one window.

use crate::border::Border;
use crate::image::{ImageView, Pixel};
use crate::error::try_filled;
use alloc::vec::Vec;
use core::ops::Range;
use crate::cpu::multiversion;

/// Accumulator arithmetic: wrapping for integers (exact modulo `2^n`), plain for f64.
pub(crate) trait Accumulator: Copy + Default + Send + Sync {
    /// Exact (modulo `2^n`) arithmetic, so sums may be formed as differences of prefixes.
    const EXACT: bool;
    fn plus(self, o: Self) -> Self;
    fn minus(self, o: Self) -> Self;
    /// `self` added `n` times.
    fn times(self, n: u64) -> Self;
}

macro_rules! wrapping_accumulator {
    ($($t:ty),*) => {$(
        impl Accumulator for $t {
            const EXACT: bool = true;
            #[inline(always)]
            fn plus(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn minus(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn times(self, n: u64) -> Self {
                self.wrapping_mul(n as $t)
            }
        }
    )*};
}
wrapping_accumulator!(u32, u64);

impl Accumulator for f64 {
    const EXACT: bool = false;
    #[inline(always)]
    fn plus(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    fn minus(self, o: Self) -> Self {
        self - o
    }
    #[inline(always)]
    fn times(self, n: u64) -> Self {
        self * n as f64
    }
}

/// How one pixel type enters the sums: its `x` and `x^2` lanes, vertical accumulator `V`
/// (enough for a column tent) and horizontal accumulator `H` (enough for a whole tent).
pub(crate) trait MomentLanes: Sync {
    type In: Pixel;
    type V: Accumulator;
    type H: Accumulator + From<Self::V>;
    fn lanes(&self, v: Self::In) -> [Self::V; 2];
}

/// The kernel a stream sums over, per axis: the tent of radius `b - 1` (two cascaded boxes
/// of width `b`) or the box of width `n = 2r + 1` (one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    Tent { b: usize },
    Box { n: usize },
}

impl Shape {
    /// Pixels the kernel reaches on each side of its centre.
    fn reach(self) -> usize {
        match self {
            Shape::Tent { b } => b - 1,
            Shape::Box { n } => n / 2,
        }
    }
    /// Sum of the weights along one axis.
    pub fn weight(self) -> u64 {
        match self {
            Shape::Tent { b } => (b * b) as u64,
            Shape::Box { n } => n as u64,
        }
    }
}

multiversion! {
    /// `A += lanes(row)` for both lanes across all columns.
    fn add_row<L: MomentLanes>(lanes: &L, a: &mut [Vec<L::V>; 2], row: &[L::In]) {
        let [a0, a1] = a;
        for ((a0, a1), &v) in a0.iter_mut().zip(a1.iter_mut()).zip(row) {
            let [x, xx] = lanes.lanes(v);
            *a0 = a0.plus(x);
            *a1 = a1.plus(xx);
        }
    }
}

multiversion! {
    /// One vertical step: `A += lanes(enter) - lanes(leave)`, `C += A - ring`, `ring = A`, for
    /// both lanes across all columns (one fused loop: `A` stays in a register).
    fn vertical_step<L: MomentLanes>(lanes: &L, planes: &mut Planes<L::V>, slot: Range<usize>, enter: &[L::In], leave: &[L::In]) {
        let Planes { a: [a0, a1], c: [c0, c1], ring: [r0, r1] } = planes;
        let (r0, r1) = (&mut r0[slot.clone()], &mut r1[slot]);
        let n = a0.len();
        let (a0, a1, c0, c1, r0, r1, enter, leave) = (&mut a0[..n], &mut a1[..n], &mut c0[..n], &mut c1[..n], &mut r0[..n], &mut r1[..n], &enter[..n], &leave[..n]);
        for i in 0..n {
            let [e0, e1] = lanes.lanes(enter[i]);
            let [l0, l1] = lanes.lanes(leave[i]);
            let x0 = a0[i].plus(e0).minus(l0);
            let x1 = a1[i].plus(e1).minus(l1);
            c0[i] = c0[i].plus(x0).minus(r0[i]);
            c1[i] = c1[i].plus(x1).minus(r1[i]);
            (a0[i], a1[i], r0[i], r1[i]) = (x0, x1, x0, x1);
        }
    }
}

multiversion! {
    /// One vertical step of a single box: `A += lanes(enter) - lanes(leave)`.
    fn slide_step<L: MomentLanes>(lanes: &L, a: &mut [Vec<L::V>; 2], enter: &[L::In], leave: &[L::In]) {
        let [a0, a1] = a;
        for (((a0, a1), &e), &l) in a0.iter_mut().zip(a1.iter_mut()).zip(enter).zip(leave) {
            let ([e0, e1], [l0, l1]) = (lanes.lanes(e), lanes.lanes(l));
            *a0 = a0.plus(e0).minus(l0);
            *a1 = a1.plus(e1).minus(l1);
        }
    }
}

/// The vertical state of both lanes: running box `A`, column tent `C` and the ring of the
/// last `B` rows of `A`.
struct Planes<V> {
    a: [Vec<V>; 2],
    c: [Vec<V>; 2],
    ring: [Vec<V>; 2],
}

impl<V: Accumulator> Planes<V> {
    /// Planes for the tent (`ring_rows = B`) or a single box (no `C`, no ring);
    /// [`Error::OutOfMemory`](crate::Error::OutOfMemory) where the allocator refuses them.
    fn new(w: usize, ring_rows: usize) -> crate::Result<Self> {
        let z = |n: usize| -> crate::Result<[Vec<V>; 2]> { Ok([try_filled(n, V::default())?, try_filled(n, V::default())?]) };
        Ok(Planes { a: z(w)?, c: z(if ring_rows > 0 { w } else { 0 })?, ring: z(w.saturating_mul(ring_rows))? })
    }
}

/// The horizontal pass: the row of column tents extended by the border rule, and the
/// tent sums along it per lane.
struct Horizontal<H> {
    /// Source column (or `None`: outside) of each extended column left and right of the row.
    left: Vec<Option<usize>>,
    right: Vec<Option<usize>>,
    /// Column tent of a fully outside column: the Constant border's lanes times `B^2`.
    outside: [H; 2],
    shape: Shape,
    /// The extended row `V` at `1..=w + 2R` (room for the prefix sums in place).
    v: [Vec<H>; 2],
    /// Running boxes of the inexact (f64) path.
    boxes: [Vec<H>; 2],
    /// The tent sums of the row.
    t: [Vec<H>; 2],
}

impl<H: Accumulator> Horizontal<H> {
    fn new<V: Accumulator>(w: usize, shape: Shape, border: Border, outside: [V; 2]) -> crate::Result<Self>
    where
        H: From<V>,
    {
        let r = shape.reach();
        let ext = |js: Range<isize>| js.map(|j| border.source_index(j, w)).collect::<Vec<_>>();
        let weight = shape.weight();
        let zeros = |n: usize| -> crate::Result<[Vec<H>; 2]> { Ok([try_filled(n, H::default())?, try_filled(n, H::default())?]) };
        let cascade = matches!(shape, Shape::Tent { .. }) && !H::EXACT;
        Ok(Horizontal {
            left: ext(-(r as isize)..0),
            right: ext(w as isize..(w + r) as isize),
            outside: [H::from(outside[0]).times(weight), H::from(outside[1]).times(weight)],
            shape,
            v: zeros(w + 2 * r + 2)?,
            boxes: zeros(if cascade { w + r } else { 0 })?,
            t: zeros(w)?,
        })
    }

    /// The kernel sums along the row `c` of column sums: exact integers as differences of
    /// prefix sums (second differences of double prefixes for the tent, module docs); f64
    /// as running boxes, whose rounding stays at the scale of a window instead of a whole
    /// row's prefix.
    fn run<V: Accumulator>(&mut self, c: &[Vec<V>; 2])
    where
        H: From<V>,
    {
        let (r, w) = (self.left.len(), c[0].len());
        for (lane, v) in self.v.iter_mut().enumerate() {
            let at = |from: &Option<usize>| from.map_or(self.outside[lane], |x| H::from(c[lane][x]));
            for (o, from) in v[1..=r].iter_mut().zip(&self.left) {
                *o = at(from);
            }
            widen(&mut v[1 + r..1 + r + w], &c[lane]);
            let tail = v.len() - 1;
            for (o, from) in v[1 + r + w..tail].iter_mut().zip(&self.right) {
                *o = at(from);
            }
            (v[0], v[tail]) = (H::default(), H::default());
        }
        let [v0, v1] = &mut self.v;
        let [t0, t1] = &mut self.t;
        let n = v0.len() - 2;
        match (self.shape, H::EXACT) {
            (Shape::Tent { b }, true) => {
                double_prefix_in_place(v0, v1);
                second_differences(v0, b, t0);
                second_differences(v1, b, t1);
            }
            (Shape::Tent { b }, false) => {
                let [a0, a1] = &mut self.boxes;
                running_boxes(&v0[1..=n], &v1[1..=n], b, a0, a1);
                running_boxes(a0, a1, b, t0, t1);
            }
            (Shape::Box { n: k }, true) => {
                prefix_in_place(v0, v1);
                first_differences(v0, k, t0);
                first_differences(v1, k, t1);
            }
            (Shape::Box { n: k }, false) => running_boxes(&v0[1..=n], &v1[1..=n], k, t0, t1),
        }
    }
}

/// `Q[0] = 0`, `Q[i + 1] = Q[i] + P[i]`, `P[i + 1] = P[i] + V[i]` in place over `V` laid out
/// at `1..`: two serial chains per lane, the two lanes side by side.
fn double_prefix_in_place<H: Accumulator>(q0: &mut [H], q1: &mut [H]) {
    let (mut p, mut s) = ([H::default(); 2], [H::default(); 2]);
    for (o0, o1) in q0[1..].iter_mut().zip(q1[1..].iter_mut()) {
        let v = [*o0, *o1];
        s = [s[0].plus(p[0]), s[1].plus(p[1])];
        (*o0, *o1) = (s[0], s[1]);
        p = [p[0].plus(v[0]), p[1].plus(v[1])];
    }
}

/// `P[0] = 0`, `P[i + 1] = P[i] + V[i]` in place over `V` laid out at `1..`.
fn prefix_in_place<H: Accumulator>(p0: &mut [H], p1: &mut [H]) {
    let mut s = [H::default(); 2];
    for (o0, o1) in p0[1..].iter_mut().zip(p1[1..].iter_mut()) {
        s = [s[0].plus(*o0), s[1].plus(*o1)];
        (*o0, *o1) = (s[0], s[1]);
    }
}

multiversion! {
    /// `t[x] = P[x + k] - P[x]`: the box sums of width `k`.
    fn first_differences<H: Accumulator>(p: &[H], k: usize, t: &mut [H]) {
        let n = t.len();
        let (lo, hi) = (&p[..n], &p[k..k + n]);
        for x in 0..n {
            t[x] = hi[x].minus(lo[x]);
        }
    }
}

multiversion! {
    /// `t[x] = Q[x + 2B] - 2 Q[x + B] + Q[x]`: the tent sums centred on each column.
    fn second_differences<H: Accumulator>(q: &[H], b: usize, t: &mut [H]) {
        let n = t.len();
        let (lo, mid, hi) = (&q[..n], &q[b..b + n], &q[2 * b..2 * b + n]);
        for x in 0..n {
            t[x] = hi[x].minus(mid[x]).minus(mid[x]).plus(lo[x]);
        }
    }
}

/// Box sums of width `b` along two lanes: `out[u] = v[u] + ... + v[u + b - 1]` for every
/// `u` of `out`, by one running sum per lane (side by side).
fn running_boxes<H: Accumulator>(v0: &[H], v1: &[H], b: usize, out0: &mut [H], out1: &mut [H]) {
    let n = out0.len().min(out1.len());
    let (mut s0, mut s1) = (H::default(), H::default());
    for (&x0, &x1) in v0[..b].iter().zip(&v1[..b]) {
        (s0, s1) = (s0.plus(x0), s1.plus(x1));
    }
    for u in 0..n {
        (out0[u], out1[u]) = (s0, s1);
        if u + b < v0.len() {
            s0 = s0.plus(v0[u + b]).minus(v0[u]);
            s1 = s1.plus(v1[u + b]).minus(v1[u]);
        }
    }
}

multiversion! {
    /// `out[i] = H::from(v[i])`.
    fn widen<V: Accumulator, H: From<V> + Accumulator>(out: &mut [H], v: &[V]) {
        for (o, &x) in out.iter_mut().zip(v) {
            *o = H::from(x);
        }
    }
}

/// Row `y` of `src`, or of the outside rows by the border rule (`const_row` for Constant).
fn source_row<'r, T: Pixel>(src: &ImageView<'r, T>, border: Border, const_row: &'r [T], y: isize) -> &'r [T] {
    match border.source_index(y, src.height()) {
        Some(s) => src.row(s),
        None => const_row,
    }
}

/// Kernel sums (tent or box, [`Shape`]) of `x` and `x^2` over `src` row after row from a
/// first output row, outside pixels from `border` (`outside` for Constant). Cost: O(width)
/// per row plus O(kernel) rows to start.
pub(crate) struct KernelStream<'a, L: MomentLanes> {
    src: ImageView<'a, L::In>,
    lanes: L,
    border: Border,
    const_row: Vec<L::In>,
    shape: Shape,
    planes: Planes<L::V>,
    horizontal: Horizontal<L::H>,
    /// The next output row.
    t: isize,
}

impl<'a, L: MomentLanes> KernelStream<'a, L> {
    /// A stream whose first [`next_row`](Self::next_row) is output row `y0`; its rows of
    /// state (a ring of `B` rows for the tent) allocated fallibly, so that an image too
    /// wide for the memory left is an error, not an abort.
    pub fn new(src: ImageView<'a, L::In>, lanes: L, shape: Shape, border: Border, outside: L::In, y0: usize) -> crate::Result<Self> {
        let w = src.width();
        let horizontal = Horizontal::<L::H>::new(w, shape, border, lanes.lanes(outside))?;
        let ring_rows = if let Shape::Tent { b } = shape { b } else { 0 };
        let planes = Planes::new(w, ring_rows)?;
        let mut s = KernelStream { src, lanes, border, const_row: try_filled(w, outside)?, shape, planes, horizontal, t: 0 };
        let (y0, r) = (y0 as isize, shape.reach() as isize);
        match shape {
            // Start from A(y0 - R - 1) = X(y0 - R - 1) + ... + X(y0 - 1), summed directly; the
            // steps to y0 - 1 here and to y0 in the first `next_row` then fill the ring (zero
            // at first, so subtracting it is a no-op until it has gone round once).
            Shape::Tent { .. } => {
                for u in y0 - r - 1..y0 {
                    add_row(&s.lanes, &mut s.planes.a, source_row(&s.src, border, &s.const_row, u));
                }
                for t in y0 - r..y0 {
                    s.vertical(t);
                }
            }
            // A(y0 - 1) = X(y0 - 1 - r) + ... + X(y0 - 1 + r).
            Shape::Box { .. } => {
                for u in y0 - 1 - r..y0 + r {
                    add_row(&s.lanes, &mut s.planes.a, source_row(&s.src, border, &s.const_row, u));
                }
            }
        }
        s.t = y0;
        Ok(s)
    }

    /// Vertical step to row `t`. Tent: `A(t) = A(t - 1) + X(t + R) - X(t - 1)`,
    /// `C += A(t) - A(t - B)`. Box: `A(t) = A(t - 1) + X(t + r) - X(t - 1 - r)`.
    fn vertical(&mut self, t: isize) {
        let KernelStream { src, lanes, border, const_row, shape, planes, .. } = self;
        let (w, r) = (src.width(), shape.reach() as isize);
        match *shape {
            Shape::Tent { b } => {
                let slot = t.rem_euclid(b as isize) as usize * w;
                let (enter, leave) = (source_row(src, *border, const_row, t + r), source_row(src, *border, const_row, t - 1));
                vertical_step(lanes, planes, slot..slot + w, enter, leave);
            }
            Shape::Box { .. } => {
                let (enter, leave) = (source_row(src, *border, const_row, t + r), source_row(src, *border, const_row, t - 1 - r));
                slide_step(lanes, &mut planes.a, enter, leave);
            }
        }
    }

    /// The kernel sums of `x` and `x^2` of the next output row (each the image width).
    pub fn next_row(&mut self) -> [&[L::H]; 2] {
        self.vertical(self.t);
        self.t += 1;
        let columns = if let Shape::Tent { .. } = self.shape { &self.planes.c } else { &self.planes.a };
        self.horizontal.run(columns);
        [&self.horizontal.t[0], &self.horizontal.t[1]]
    }
}
