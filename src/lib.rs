pub use tessera_core::*;
