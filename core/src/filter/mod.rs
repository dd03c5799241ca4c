//! Sliding-window filters: box / mean (recursive running sums) and Gaussian.

pub mod box_filter;
pub mod gaussian;
pub mod gaussian_fir;
pub mod gaussian_iir;
pub mod sliding;

pub use box_filter::{box_sum, box_sum_f32, mean_filter, mean_filter_naive, BoxParams, BoxPixel};
pub use gaussian::{gaussian_blur, gaussian_weights, GaussLane, GaussianMethod, GaussianParams};
pub use sliding::{window_sums, LaneView, Window, MAX_WINDOW};
