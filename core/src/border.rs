//! How a window that reaches past the image edge is filled.

use crate::error::{require_finite, Result};

/// Border rule for pixels outside the image. With `n` pixels in a row (indices 0..n):
///
/// - `Reflect101`: mirror without repeating the edge pixel (`... 2 1 | 0 1 2 ... n-1 | n-2 ...`),
///   the mirror replication of the variance paper and OpenCV's `BORDER_REFLECT_101`.
///   It repeats periodically, so any window size works even on a tiny image.
/// - `Replicate`: the edge pixel repeats (`0 0 | 0 1 ... n-1 | n-1 n-1`).
/// - `Constant(v)`: outside pixels have value `v` (for integer images `v` must be a whole
///   number in the type's range).
/// - `Normalize`: outside pixels are left out; a mean divides by the number of in-bounds
///   pixels only (the OpenCL mean filter's counting).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Border {
    #[default]
    Reflect101,
    Replicate,
    Constant(f32),
    Normalize,
}

impl core::fmt::Display for Border {
    /// The name the command line and the plugin parse: `reflect101`, `replicate`,
    /// `normalize` or `constant:V`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Border::Reflect101 => f.write_str("reflect101"),
            Border::Replicate => f.write_str("replicate"),
            Border::Normalize => f.write_str("normalize"),
            Border::Constant(v) => write!(f, "constant:{v}"),
        }
    }
}

impl core::str::FromStr for Border {
    type Err = alloc::string::String;

    /// Parses the names [`Display`](core::fmt::Display) writes, case-insensitively, and the
    /// aliases `reflect-101`, `mirror` (for `reflect101`) and `clamp` (for `replicate`).
    fn from_str(s: &str) -> core::result::Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "reflect101" | "reflect-101" | "mirror" => Ok(Border::Reflect101),
            "replicate" | "clamp" => Ok(Border::Replicate),
            "normalize" => Ok(Border::Normalize),
            other => match other.strip_prefix("constant:") {
                Some(v) => v.parse::<f32>().map(Border::Constant).map_err(|e| alloc::format!("constant value {v:?}: {e}")),
                None => Err(alloc::format!("unknown border {s:?} (reflect101, replicate, normalize, constant:V)")),
            },
        }
    }
}

impl Border {
    /// Where index `i` of a row of `n` pixels reads from: `Some(index)` inside the image or
    /// by reflection / replication, `None` for a `Constant` or `Normalize` outside pixel.
    #[inline]
    pub fn source_index(self, i: isize, n: usize) -> Option<usize> {
        if i >= 0 && (i as usize) < n {
            return Some(i as usize);
        }
        match self {
            Border::Reflect101 => Some(reflect101(i, n)),
            Border::Replicate => Some(if i < 0 { 0 } else { n - 1 }),
            Border::Constant(_) | Border::Normalize => None,
        }
    }

    /// The value an outside pixel contributes when `source_index` is `None`.
    pub fn outside_value(self) -> f32 {
        match self {
            Border::Constant(v) => v,
            _ => 0.0,
        }
    }

    /// Checks the constant (finite; whole and within `0..=max` for integer images).
    pub fn validate(self, integer_max: Option<f32>) -> Result<()> {
        if let Border::Constant(v) = self {
            require_finite("border constant", v as f64)?;
            if let Some(max) = integer_max {
                if v < 0.0 || v > max || v != libm::truncf(v) {
                    return Err(crate::Error::InvalidFloat {
                        name: "border constant",
                        value: v as f64,
                        expected: "a whole number within the pixel type's range",
                    });
                }
            }
        }
        Ok(())
    }
}

/// Reflect-101 index of `i` in `0..n`, for any `i` (the mirror repeats with period 2n - 2).
#[inline]
pub fn reflect101(i: isize, n: usize) -> usize {
    if n == 1 {
        return 0;
    }
    let period = 2 * (n as isize - 1);
    let m = i.rem_euclid(period);
    if m < n as isize {
        m as usize
    } else {
        (period - m) as usize
    }
}

/// Number of indices of the window `[c - before, c + after]` that fall inside `0..n`.
#[inline]
pub fn inside_count(c: usize, before: usize, after: usize, n: usize) -> usize {
    let lo = c.saturating_sub(before);
    let hi = (c + after).min(n - 1);
    hi + 1 - lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflect101_matches_the_definition() {
        // n = 4: ... 2 1 | 0 1 2 3 | 2 1 0 1 2 3 2 ...
        let want = [3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1];
        for (k, i) in (-3isize..8).enumerate() {
            assert_eq!(reflect101(i, 4), want[k], "i = {i}");
        }
        assert_eq!(reflect101(-5, 1), 0);
        assert_eq!(reflect101(7, 2), 1);
    }

    #[test]
    fn constant_is_checked_for_integer_images() {
        assert!(Border::Constant(3.0).validate(Some(255.0)).is_ok());
        assert!(Border::Constant(3.5).validate(Some(255.0)).is_err());
        assert!(Border::Constant(-1.0).validate(Some(255.0)).is_err());
        assert!(Border::Constant(f32::NAN).validate(None).is_err());
        assert!(Border::Constant(0.25).validate(None).is_ok());
    }
}
