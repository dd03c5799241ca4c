//! The kernel sources, one file per core module, and how a kernel is named: a [`Module`]
//! (what NVRTC compiles, and what the driver loads) and the kernel's `extern "C"` name.

/// One kernel file of `kernels/`, compiled as a unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Module {
    Filter,
    Variance,
    Contrast,
    Glare,
    Ncc,
    Consensus,
    Quality,
    Refine,
    Stitch,
    Stereo,
    Linalg,
}

/// `common.cuh`, the header every kernel file includes.
pub const COMMON_HEADER: (&str, &str) = ("common.cuh", include_str!("../kernels/common.cuh"));

impl Module {
    /// Every kernel file.
    pub const ALL: [Module; 11] = [
        Module::Filter,
        Module::Variance,
        Module::Contrast,
        Module::Glare,
        Module::Ncc,
        Module::Consensus,
        Module::Quality,
        Module::Refine,
        Module::Stitch,
        Module::Stereo,
        Module::Linalg,
    ];

    /// The file name under `kernels/`.
    pub fn file(self) -> &'static str {
        match self {
            Module::Filter => "filter.cu",
            Module::Variance => "variance.cu",
            Module::Contrast => "contrast.cu",
            Module::Glare => "glare.cu",
            Module::Ncc => "ncc.cu",
            Module::Consensus => "consensus.cu",
            Module::Quality => "quality.cu",
            Module::Refine => "refine.cu",
            Module::Stitch => "stitch.cu",
            Module::Stereo => "stereo.cu",
            Module::Linalg => "linalg.cu",
        }
    }

    /// The CUDA C source.
    pub fn source(self) -> &'static str {
        match self {
            Module::Filter => include_str!("../kernels/filter.cu"),
            Module::Variance => include_str!("../kernels/variance.cu"),
            Module::Contrast => include_str!("../kernels/contrast.cu"),
            Module::Glare => include_str!("../kernels/glare.cu"),
            Module::Ncc => include_str!("../kernels/ncc.cu"),
            Module::Consensus => include_str!("../kernels/consensus.cu"),
            Module::Quality => include_str!("../kernels/quality.cu"),
            Module::Refine => include_str!("../kernels/refine.cu"),
            Module::Stitch => include_str!("../kernels/stitch.cu"),
            Module::Stereo => include_str!("../kernels/stereo.cu"),
            Module::Linalg => include_str!("../kernels/linalg.cu"),
        }
    }

    /// The `extern "C" __global__` kernels the file defines, in source order (read from the
    /// source, so the list cannot fall behind it).
    pub fn kernels(self) -> impl Iterator<Item = &'static str> {
        self.source().lines().filter_map(|l| {
            let rest = l.trim_start().strip_prefix("extern \"C\" __global__ ")?;
            // `void name(` or `__launch_bounds__(..) void name(`.
            let (_, after) = rest.split_once("void ")?;
            Some(after[..after.find('(')?].trim())
        })
    }
}

/// A kernel: the file that defines it and its `extern "C"` name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Kernel {
    pub module: Module,
    pub name: &'static str,
}

impl Kernel {
    pub const fn new(module: Module, name: &'static str) -> Self {
        Kernel { module, name }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_lists_its_kernels() {
        let linalg: Vec<_> = Module::Linalg.kernels().collect();
        assert!(linalg.contains(&"mat_add_f32"), "{linalg:?}");
        for m in Module::ALL {
            for k in m.kernels() {
                assert!(m.source().contains(&format!("TESSERA_EXPORT({k})")), "{k} of {} is not exported to the shim", m.file());
            }
        }
    }
}
