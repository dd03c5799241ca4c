//! The names of the choices a user makes (a blend, a search method, a motion model, a tile
//! order, a matching cost, a backend, ...): one table per choice, here in the core, read by
//! every face. The command line's value parsers, the Python keywords, the ImageJ plugin's
//! options and the stitching report all spell a value as [`Choice::name`] does, and parse it
//! with [`Choice::from_name`].
//!
//! The choices whose types carry their names beside them (`BackendChoice`,
//! `VarianceMethod`, `GaussianMethod`, `Acceptance`) answer with those; the others have
//! their tables here.

use crate::backend::BackendChoice;
use crate::error::{Error, Result};
use crate::filter::GaussianMethod;
use crate::glare::GlareMode;
use crate::stereo::CostKind;
use crate::stitch::{Acceptance, Blend, Corner, Motion, SearchMethod, TileOrder};
use crate::variance::VarianceMethod;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// A value picked from a fixed list by its name.
pub trait Choice: Copy + PartialEq + Sized + 'static {
    /// What is chosen, as an error message names it ("blend", "search method").
    const WHAT: &'static str;
    /// Every value, in the order help texts list them.
    const ALL: &'static [Self];

    /// The name a user types: lower case, words joined by `-` (`log-plain`, `snake-row`).
    fn name(self) -> &'static str;

    /// One line for help texts (empty where the name says it all).
    fn describe(self) -> &'static str {
        ""
    }

    /// The value of a name (case-insensitive), or an error listing the names.
    fn from_name(s: &str) -> Result<Self> {
        Self::ALL.iter().copied().find(|c| c.name().eq_ignore_ascii_case(s)).ok_or_else(|| Error::InvalidParameter {
            name: Self::WHAT,
            reason: format!("unknown value {s:?}; expected one of {}", names::<Self>().join(", ")),
        })
    }
}

/// Every name of choice `C`, in [`Choice::ALL`]'s order.
pub fn names<C: Choice>() -> Vec<&'static str> {
    C::ALL.iter().map(|c| c.name()).collect()
}

/// `a, b or c`: the names of `C` as a sentence lists them.
pub fn listed<C: Choice>() -> String {
    match names::<C>().split_last() {
        Some((last, [])) => String::from(*last),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

impl Choice for BackendChoice {
    const WHAT: &'static str = "backend";
    const ALL: &'static [Self] = &BackendChoice::ALL;
    fn name(self) -> &'static str {
        BackendChoice::name(self)
    }
    fn describe(self) -> &'static str {
        BackendChoice::describe(self)
    }
    fn from_name(s: &str) -> Result<Self> {
        s.parse()
    }
}

impl Choice for VarianceMethod {
    const WHAT: &'static str = "variance method";
    const ALL: &'static [Self] = &VarianceMethod::ALL;
    fn name(self) -> &'static str {
        VarianceMethod::name(self)
    }
    fn from_name(s: &str) -> Result<Self> {
        VarianceMethod::from_name(s)
    }
}

impl Choice for GaussianMethod {
    const WHAT: &'static str = "gaussian method";
    const ALL: &'static [Self] = &[GaussianMethod::Auto, GaussianMethod::Fir, GaussianMethod::Iir];
    fn name(self) -> &'static str {
        GaussianMethod::name(self)
    }
    fn from_name(s: &str) -> Result<Self> {
        GaussianMethod::from_name(s)
    }
}

impl Choice for Acceptance {
    const WHAT: &'static str = "acceptance";
    const ALL: &'static [Self] = &[Acceptance::Adaptive, Acceptance::Fixed];
    fn name(self) -> &'static str {
        Acceptance::name(self)
    }
    fn describe(self) -> &'static str {
        match self {
            Acceptance::Adaptive => "Against the template's own null sample (default)",
            Acceptance::Fixed => "A coefficient of at least --cthresh (the original)",
        }
    }
}

impl Choice for SearchMethod {
    const WHAT: &'static str = "search method";
    const ALL: &'static [Self] = &[SearchMethod::Log, SearchMethod::LogPlain, SearchMethod::Exhaustive];
    fn name(self) -> &'static str {
        match self {
            SearchMethod::Log => "log",
            SearchMethod::LogPlain => "log-plain",
            SearchMethod::Exhaustive => "exhaustive",
        }
    }
    fn describe(self) -> &'static str {
        match self {
            SearchMethod::Log => "Centre-biased logarithmic search (default)",
            SearchMethod::LogPlain => "The original's plain logarithmic (three-step) search",
            SearchMethod::Exhaustive => "Every position of the search area",
        }
    }
}

impl Choice for Motion {
    const WHAT: &'static str = "motion";
    const ALL: &'static [Self] = &[Motion::Translation, Motion::Similarity];
    fn name(self) -> &'static str {
        match self {
            Motion::Translation => "translation",
            Motion::Similarity => "similarity",
        }
    }
    fn describe(self) -> &'static str {
        match self {
            Motion::Translation => "Shift only (the original)",
            Motion::Similarity => "Rotation, optionally scale, and shift (default)",
        }
    }
}

impl Choice for Blend {
    const WHAT: &'static str = "blend";
    const ALL: &'static [Self] = &[Blend::Overwrite, Blend::Average, Blend::Feather];
    fn name(self) -> &'static str {
        match self {
            Blend::Overwrite => "overwrite",
            Blend::Average => "average",
            Blend::Feather => "feather",
        }
    }
}

impl Choice for TileOrder {
    const WHAT: &'static str = "tile order";
    const ALL: &'static [Self] = &[TileOrder::Row, TileOrder::Column, TileOrder::SnakeRow, TileOrder::SnakeColumn];
    fn name(self) -> &'static str {
        match self {
            TileOrder::Row => "row",
            TileOrder::Column => "column",
            TileOrder::SnakeRow => "snake-row",
            TileOrder::SnakeColumn => "snake-column",
        }
    }
}

impl Choice for Corner {
    const WHAT: &'static str = "start corner";
    const ALL: &'static [Self] = &[Corner::TopLeft, Corner::TopRight, Corner::BottomLeft, Corner::BottomRight];
    fn name(self) -> &'static str {
        match self {
            Corner::TopLeft => "top-left",
            Corner::TopRight => "top-right",
            Corner::BottomLeft => "bottom-left",
            Corner::BottomRight => "bottom-right",
        }
    }
}

impl Choice for GlareMode {
    const WHAT: &'static str = "glare mode";
    const ALL: &'static [Self] = &[GlareMode::Adaptive, GlareMode::Manual];
    fn name(self) -> &'static str {
        match self {
            GlareMode::Adaptive => "adaptive",
            GlareMode::Manual => "manual",
        }
    }
}

impl Choice for CostKind {
    const WHAT: &'static str = "stereo cost";
    const ALL: &'static [Self] = &[CostKind::Census, CostKind::Ad, CostKind::Mi];
    fn name(self) -> &'static str {
        match self {
            CostKind::Census => "census",
            CostKind::Ad => "ad",
            CostKind::Mi => "mi",
        }
    }
    fn describe(self) -> &'static str {
        match self {
            CostKind::Census => "Census transform + Hamming distance (window --census-window)",
            CostKind::Ad => "Modified absolute difference (colour or gray)",
            CostKind::Mi => "Mutual information, re-estimated --mi-iterations times",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    fn round_trips<C: Choice + core::fmt::Debug>() {
        for &c in C::ALL {
            assert_eq!(C::from_name(c.name()).unwrap(), c);
            assert_eq!(C::from_name(&c.name().to_ascii_uppercase()).unwrap(), c);
        }
        let mut n = names::<C>();
        n.sort_unstable();
        n.dedup();
        assert_eq!(n.len(), C::ALL.len(), "{} names are unique", C::WHAT);
        assert!(C::from_name("no-such-name").is_err());
    }

    #[test]
    fn every_name_reads_back() {
        round_trips::<BackendChoice>();
        round_trips::<VarianceMethod>();
        round_trips::<GaussianMethod>();
        round_trips::<Acceptance>();
        round_trips::<SearchMethod>();
        round_trips::<Motion>();
        round_trips::<Blend>();
        round_trips::<TileOrder>();
        round_trips::<Corner>();
        round_trips::<GlareMode>();
        round_trips::<CostKind>();
    }

    #[test]
    fn errors_list_the_names() {
        let e = SearchMethod::from_name("spiral").unwrap_err();
        assert_eq!(e.to_string(), "invalid search method: unknown value \"spiral\"; expected one of log, log-plain, exhaustive");
        assert_eq!(listed::<Motion>(), "translation or similarity");
        assert_eq!(listed::<Blend>(), "overwrite, average or feather");
    }
}
