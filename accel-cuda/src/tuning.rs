//! Kernel designs chosen per device.
//!
//! Some kernel families keep more than one design, and which is faster depends on the
//! device (the SGM aggregation in one launch with atomic adds, or a launch per direction);
//! so does where a device stitch does its pairs' host work, which depends on the host's
//! cores (`stitch_host_work`).
//! `scripts/gpu-check run` times every design of every family in one device call and writes
//! the winners to a tuning table, `accel-cuda/tuning/<device>.json`; the tables in that
//! folder are compiled into the backend (`build.rs`), looked up by the device's name.
//!
//! A family's design is, first found first: a design fixed on the backend (for the tests of
//! each design; the environment is process-wide), the environment variable `TESSERA_<FAMILY>`
//! (upper case; for measuring one design against another), the device's table, the built-in
//! default of the family. A table names its device, the date and command of the run that
//! chose it, and for each family the winner (`"choices"`) and the times it was chosen on.
//!
//! A family's designs are a [`Design`]: a [`Choice`] (the designs by name, the built-in
//! default first) with the family's name.

use crate::device::Gpu;
use std::collections::HashMap;
use tessera_core::choice::Choice;
use tessera_core::{Error, Result};

/// A kernel family with more than one design: its designs by name ([`Choice::ALL`], the
/// built-in default first) and the family's name in the tuning tables.
pub trait Design: Choice {
    /// The family's name in the tables; upper case after `TESSERA_`, its environment
    /// variable.
    const FAMILY: &'static str;
}

/// The design of family `D` chosen for `gpu` (the order of the module doc), or an error
/// naming the designs where the environment or a table names none of them.
pub(crate) fn chosen<D: Design>(gpu: &Gpu) -> Result<D> {
    let name = gpu.tuning().choice(D::FAMILY, D::ALL[0].name());
    D::from_name(&name).map_err(|e| Error::Backend(format!("{} (or the tuning table): {e}", env_name(D::FAMILY))))
}

/// The tables of `accel-cuda/tuning/`: (file stem, contents).
const TABLES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/tuning_tables.rs"));

/// The chosen designs for one device.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tuning {
    choices: HashMap<String, String>,
    /// Designs fixed over the environment and the table.
    fixed: HashMap<String, String>,
    /// Where the choices come from: the table's file stem, or `None` for the defaults.
    table: Option<&'static str>,
}

impl Tuning {
    /// The table whose `"device"` is `model` (as the driver names the GPU, e.g.
    /// `NVIDIA H200`), or the built-in defaults where none is. A table that does not parse
    /// is skipped (the test of the folder keeps them parseable).
    pub(crate) fn for_device(model: &str) -> Tuning {
        TABLES
            .iter()
            .filter_map(|&(stem, text)| Some((stem, parse(text)?)))
            .find(|(_, t)| t.device == model)
            .map(|(stem, t)| Tuning { choices: t.choices, fixed: HashMap::new(), table: Some(stem) })
            .unwrap_or_default()
    }

    /// Fixes the design of `family` to `design`, over the environment and the table.
    #[cfg(any(test, feature = "shim"))]
    pub(crate) fn fix(&mut self, family: &str, design: &str) {
        self.fixed.insert(family.to_string(), design.to_string());
    }

    /// The design of `family`: the fixed one, else the environment's `TESSERA_<FAMILY>`,
    /// else the table's choice, else `default`.
    pub(crate) fn choice(&self, family: &str, default: &str) -> String {
        if let Some(d) = self.fixed.get(family) {
            return d.clone();
        }
        std::env::var(env_name(family))
            .ok()
            .filter(|v| !v.is_empty())
            .or_else(|| self.choices.get(family).cloned())
            .unwrap_or_else(|| default.to_string())
    }

    /// The table in use (file stem), for reports.
    pub(crate) fn table(&self) -> Option<&'static str> {
        self.table
    }
}

/// The environment variable that overrides `family`'s design.
pub(crate) fn env_name(family: &str) -> String {
    format!("TESSERA_{}", family.to_ascii_uppercase())
}

struct Table {
    device: String,
    choices: HashMap<String, String>,
}

fn parse(text: &str) -> Option<Table> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let device = v.get("device")?.as_str()?.to_string();
    let choices = v.get("choices")?.as_object()?.iter().filter_map(|(k, c)| Some((k.clone(), c.as_str()?.to_string()))).collect();
    Some(Table { device, choices })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_parses_and_names_a_device_once() {
        let mut seen = std::collections::HashSet::new();
        for (stem, text) in TABLES {
            let t = parse(text).unwrap_or_else(|| panic!("tuning/{stem}.json does not parse as a table"));
            assert!(!t.choices.is_empty(), "tuning/{stem}.json chooses nothing");
            assert!(seen.insert(t.device.clone()), "two tables for {}", t.device);
            assert_eq!(Tuning::for_device(&t.device).table(), Some(*stem));
        }
    }

    #[test]
    fn each_design_variable_is_its_family_s() {
        use crate::filter::{BoxKernel, FirDesign, IirDesign, BOX_SHAPE};
        assert_eq!(crate::BOX_KERNEL_ENV, env_name(BoxKernel::FAMILY));
        assert_eq!(crate::BOX_SHAPE_ENV, env_name(BOX_SHAPE));
        assert_eq!(crate::GAUSS_FIR_ENV, env_name(FirDesign::FAMILY));
        assert_eq!(crate::GAUSS_IIR_ENV, env_name(IirDesign::FAMILY));
        assert_eq!(crate::VARIANCE_KERNEL_ENV, env_name(crate::MomentsDesign::FAMILY));
        assert_eq!(crate::SGM_AGGREGATION_ENV, env_name(crate::SgmAggregation::FAMILY));
        assert_eq!(crate::STITCH_HOST_WORK_ENV, env_name(crate::StitchHostWork::FAMILY));
    }

    #[test]
    fn an_unknown_device_gets_the_defaults() {
        let t = Tuning::for_device("no such GPU");
        assert_eq!(t.table(), None);
        assert_eq!(t.choice("tuning_test_family_without_table", "built-in"), "built-in");
    }

    #[test]
    fn a_table_choice_is_used_and_the_environment_overrides_it() {
        let mut t = Tuning { choices: HashMap::from([("tuning_test_family".to_string(), "from-table".to_string())]), fixed: HashMap::new(), table: Some("test") };
        assert_eq!(t.choice("tuning_test_family", "default"), "from-table");
        // A variable no other test reads, so that setting it races with nothing.
        std::env::set_var(env_name("tuning_test_family"), "from-env");
        assert_eq!(t.choice("tuning_test_family", "default"), "from-env");
        t.fix("tuning_test_family", "fixed");
        assert_eq!(t.choice("tuning_test_family", "default"), "fixed");
        std::env::remove_var(env_name("tuning_test_family"));
    }

    #[test]
    fn malformed_tables_are_refused() {
        assert!(parse("not json").is_none());
        assert!(parse(r#"{"choices": {"a": "b"}}"#).is_none());
        assert!(parse(r#"{"device": "X"}"#).is_none());
        let t = parse(r#"{"device": "X", "choices": {"a": "b", "n": 3}}"#).unwrap();
        assert_eq!(t.choices.len(), 1);
    }
}
