//! Sliding-window filters: box / mean (recursive running sums) and Gaussian.

pub(crate) mod box_filter;
pub(crate) mod gaussian;
pub(crate) mod gaussian_fir;
pub(crate) mod gaussian_iir;
pub(crate) mod sliding;

pub use box_filter::{box_sum, box_sum_f32, mean_filter, mean_filter_naive, BoxParams, BoxPixel};
pub use gaussian::{gaussian_blur, gaussian_blur_f32, gaussian_weights, GaussLane, GaussianMethod, GaussianParams};
pub use gaussian_iir::IirCoefficients;
pub use sliding::{window_sums, LaneView, Window, MAX_WINDOW};
