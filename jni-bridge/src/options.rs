//! Parameters cross the boundary as one options string per call, in the ImageJ macro style
//! that `GenericDialog` records (`"rsz=25 npts=6 cthresh=0.85 blend=feather backend=cpu"`),
//! with the command-line program's long option names, and are parsed here once.
//!
//! Every operation lists its options once, in [`Op::visit`]: the same walk fills a parameter
//! struct from a string ([`parse`]) and writes a struct out as a string ([`defaults`]), so the
//! defaults the plugin shows are the core's `Default`, and a key can never be parsed under
//! one name and reported under another. An unknown key, a value that does not parse, or a
//! flag given a value it cannot take is an `IllegalArgumentException` naming the key.
//!
//! Syntax: words separated by white space; `key=value`, `key=[a value with spaces]` (as
//! ImageJ brackets such values), or a bare `key`, which sets a flag (`subpixel` is
//! `subpixel=true`). `backend=cpu|cuda|auto` is accepted by every operation (default
//! `auto`).

use crate::backend;
use crate::error::{bad_arg, Result};
use jni::objects::JString;
use jni::Env;
use tessera_core::{Backend, Choice};

/// A value an option can hold, spelled as the command-line program spells it.
pub trait OptValue: Sized {
    /// The value of `s`, or what was expected instead.
    fn parse(s: &str) -> std::result::Result<Self, String>;
    /// The spelling [`OptValue::parse`] reads back to the same value.
    fn show(&self) -> String;
}

/// One walk over an operation's options, in a fixed order.
pub trait Visitor {
    /// Visits the option `key`, which holds `value`.
    fn field<T: OptValue>(&mut self, key: &'static str, value: &mut T) -> Result<()>;
}

/// An operation's parameter struct as options (implemented for the core's parameter
/// structs, next to each entry point).
pub trait Op: Default {
    /// The operation's name, as `Native.defaults` takes it and messages say it.
    const NAME: &'static str;
    /// Visits every option, each with its key; several options may fill one field (a
    /// kernel's shape and its radius). Ranges are left to the core's own validation.
    fn visit(&mut self, v: &mut impl Visitor) -> Result<()>;
}

/// One `key`, `key=value` or `key=[value]` word of an options string.
struct Word<'a> {
    key: &'a str,
    value: Option<&'a str>,
    used: bool,
}

/// Splits an options string into words (module doc).
fn words(s: &str) -> Result<Vec<Word<'_>>> {
    let mut out = Vec::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        let end = rest.find(|c: char| c.is_whitespace() || c == '=').unwrap_or(rest.len());
        let key = &rest[..end];
        if key.is_empty() {
            return Err(bad_arg(format!("options: a value without a key at \"{rest}\"")));
        }
        rest = &rest[end..];
        let value = match rest.strip_prefix('=') {
            None => None,
            Some(after) => {
                let (v, tail) = match after.strip_prefix('[') {
                    Some(b) => {
                        let close = b.find(']').ok_or_else(|| bad_arg(format!("options: {key}=[ has no closing ]")))?;
                        (&b[..close], &b[close + 1..])
                    }
                    None => after.split_at(after.find(char::is_whitespace).unwrap_or(after.len())),
                };
                rest = tail;
                Some(v)
            }
        };
        out.push(Word { key, value, used: false });
        rest = rest.trim_start();
    }
    Ok(out)
}

/// Fills options from a string, marking each word it takes; what is left unmarked is no
/// option of the operation ([`Parser::finish`]).
struct Parser<'a> {
    op: &'static str,
    words: Vec<Word<'a>>,
}

impl Visitor for Parser<'_> {
    fn field<T: OptValue>(&mut self, key: &'static str, value: &mut T) -> Result<()> {
        let Some(raw) = self.take(key) else {
            return Ok(());
        };
        let raw = raw.unwrap_or("true");
        *value = T::parse(raw).map_err(|why| bad_arg(format!("{} option {key}={raw}: {why}", self.op)))?;
        Ok(())
    }
}

impl<'a> Parser<'a> {
    /// The value given for `key` (`Some(None)` for a bare key), marking the word taken.
    /// ImageJ's Macro.getValue takes the first occurrence of a key; so does this.
    fn take(&mut self, key: &str) -> Option<Option<&'a str>> {
        let w = self.words.iter_mut().find(|w| w.key == key)?;
        w.used = true;
        Some(w.value)
    }

    /// An error naming the first key that no option of operation `P` took, and the known
    /// ones (listed only then: the hot path does not collect them).
    fn finish<P: Op>(self) -> Result<()> {
        let Some(w) = self.words.iter().find(|w| !w.used) else {
            return Ok(());
        };
        let known: Vec<&str> = defaults::<P>()?.into_iter().map(|(k, _)| k).collect();
        Err(bad_arg(if known.contains(&w.key) {
            format!("{} option \"{}\" is given twice", self.op, w.key)
        } else {
            format!("unknown {} option \"{}\" (known: {})", self.op, w.key, known.join(", "))
        }))
    }
}

/// Writes options out as `key=value` pairs.
struct Writer(Vec<(&'static str, String)>);

impl Visitor for Writer {
    fn field<T: OptValue>(&mut self, key: &'static str, value: &mut T) -> Result<()> {
        self.0.push((key, value.show()));
        Ok(())
    }
}

/// The parameters of operation `P` from an options string (keys not given keep
/// `P::default()`'s values), and the backend it names (`backend=`, default `auto`). A null
/// string (`None`) is all defaults.
pub fn parse<P: Op>(options: Option<&str>) -> Result<(P, &'static dyn Backend)> {
    let mut p = P::default();
    let mut parser = Parser { op: P::NAME, words: words(options.unwrap_or(""))? };
    p.visit(&mut parser)?;
    let backend = parser.take("backend").map_or(Ok("auto"), |v| v.ok_or_else(|| bad_arg("backend needs a name: cpu, cuda or auto")))?;
    parser.finish::<P>()?;
    Ok((p, backend::select(backend)?))
}

/// [`parse`] of a Java options string (null: all defaults). The string is read in place
/// (ASCII needs no conversion) and released before the call goes on.
pub fn from_java<P: Op>(env: &Env<'_>, options: &JString<'_>) -> Result<(P, &'static dyn Backend)> {
    if options.is_null() {
        return parse(None);
    }
    let chars = options.mutf8_chars(env)?;
    parse(Some(&chars.to_str()))
}

/// Operation `P`'s options at their defaults, in visiting order, `backend=auto` last.
pub fn defaults<P: Op>() -> Result<Vec<(&'static str, String)>> {
    let mut w = Writer(Vec::new());
    P::default().visit(&mut w)?;
    w.0.push(("backend", "auto".into()));
    Ok(w.0)
}

/// A whole number from its decimal spelling; ImageJ dialogs record whole numbers that way.
macro_rules! whole_number {
    ($($t:ty),+) => {$(
        impl OptValue for $t {
            fn parse(s: &str) -> std::result::Result<Self, String> {
                s.parse().map_err(|_| format!("expected a whole number within {}..={}", <$t>::MIN, <$t>::MAX))
            }
            fn show(&self) -> String {
                self.to_string()
            }
        }
    )+};
}
whole_number!(usize, u8, u16);

/// A real number; Rust's shortest round-trip spelling, which Java's parseDouble reads back
/// to the same value.
macro_rules! real_number {
    ($($t:ty),+) => {$(
        impl OptValue for $t {
            fn parse(s: &str) -> std::result::Result<Self, String> {
                s.parse().map_err(|_| "expected a number".to_string())
            }
            fn show(&self) -> String {
                self.to_string()
            }
        }
    )+};
}
real_number!(f32, f64);

impl OptValue for bool {
    fn parse(s: &str) -> std::result::Result<Self, String> {
        match s {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err("expected true or false".into()),
        }
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

/// `auto` (the operation picks, `None`) or a value.
impl<T: OptValue> OptValue for Option<T> {
    fn parse(s: &str) -> std::result::Result<Self, String> {
        if s == "auto" {
            return Ok(None);
        }
        T::parse(s).map(Some).map_err(|why| format!("{why}, or auto"))
    }
    fn show(&self) -> String {
        self.as_ref().map_or_else(|| "auto".into(), T::show)
    }
}

/// A comma-separated list (`7,31,127`; spaces after the commas allowed; empty: none, which
/// the operation's own check reports).
impl<T: OptValue> OptValue for Vec<T> {
    fn parse(s: &str) -> std::result::Result<Self, String> {
        if s.trim().is_empty() {
            return Ok(Vec::new());
        }
        s.split(',').map(|p| T::parse(p.trim())).collect::<std::result::Result<_, _>>().map_err(|why| format!("{why}, separated by commas"))
    }
    fn show(&self) -> String {
        self.iter().map(T::show).collect::<Vec<_>>().join(",")
    }
}

/// Options whose values are the core's choices, by the core's names ([`Choice`]), so the
/// plugin spells them as the command line does.
macro_rules! core_named {
    ($($t:ty),+) => {$(
        impl OptValue for $t {
            fn parse(s: &str) -> std::result::Result<Self, String> {
                <$t as Choice>::from_name(s).map_err(|e| e.to_string())
            }
            fn show(&self) -> String {
                Choice::name(*self).into()
            }
        }
    )+};
}
core_named!(
    tessera_core::variance::VarianceMethod,
    tessera_core::filter::GaussianMethod,
    tessera_core::glare::GlareMode,
    tessera_core::stitch::SearchMethod,
    tessera_core::stitch::Acceptance,
    tessera_core::stitch::Blend,
    tessera_core::stitch::Motion,
    tessera_core::stitch::TileOrder,
    tessera_core::stitch::Corner
);

/// Options whose values are names: each name once, in one table per type. `show` meets
/// only the defaults and what `parse` made, so every value it sees is in the table.
macro_rules! named {
    ($t:ty { $($name:literal => $value:expr),+ $(,)? }) => {
        impl $crate::options::OptValue for $t {
            fn parse(s: &str) -> std::result::Result<Self, String> {
                match s {
                    $($name => Ok($value),)+
                    _ => Err(format!("expected one of {}", [$($name),+].join(", "))),
                }
            }
            fn show(&self) -> String {
                $(if *self == $value { return $name.into(); })+
                unreachable!("every value of {} has a name", stringify!($t))
            }
        }
    };
}
pub(crate) use named;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, PartialEq)]
    struct Demo {
        size: usize,
        ratio: f64,
        flag: bool,
        radii: Vec<usize>,
        limit: Option<u16>,
    }

    impl Op for Demo {
        const NAME: &'static str = "demo";
        fn visit(&mut self, v: &mut impl Visitor) -> Result<()> {
            v.field("size", &mut self.size)?;
            v.field("ratio", &mut self.ratio)?;
            v.field("flag", &mut self.flag)?;
            v.field("radii", &mut self.radii)?;
            v.field("limit", &mut self.limit)
        }
    }

    fn message(r: Result<(Demo, &'static dyn Backend)>) -> String {
        match r {
            Err(crate::error::BridgeError::Argument(m)) => m,
            other => panic!("expected an argument error, got {:?}", other.map(|(d, _)| d)),
        }
    }

    #[test]
    fn reads_values_brackets_and_bare_flags() {
        let (d, b) = parse::<Demo>(Some("  size=25 ratio=0.85 flag radii=[7, 31,127] limit=auto backend=cpu ")).unwrap();
        assert_eq!(d, Demo { size: 25, ratio: 0.85, flag: true, radii: vec![7, 31, 127], limit: None });
        assert_eq!(b.name(), "cpu");
        assert_eq!(parse::<Demo>(Some("limit=90 flag=false")).unwrap().0.limit, Some(90));
        assert_eq!(parse::<Demo>(None).unwrap().0, Demo::default());
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let m = message(parse::<Demo>(Some("size=3 sise=4")));
        assert!(m.contains("unknown demo option \"sise\""), "{m}");
        assert!(m.contains("size, ratio, flag, radii, limit, backend"), "{m}");
        let m = message(parse::<Demo>(Some("size=-3")));
        assert!(m.contains("size=-3") && m.contains("whole number"), "{m}");
        assert!(message(parse::<Demo>(Some("ratio"))).contains("ratio=true: expected a number"));
        assert!(message(parse::<Demo>(Some("flag=yes"))).contains("true or false"));
        assert!(message(parse::<Demo>(Some("limit=70000"))).contains("limit"));
        assert!(message(parse::<Demo>(Some("radii=[7,31"))).contains("no closing"));
        assert!(message(parse::<Demo>(Some("=5"))).contains("without a key"));
        assert!(message(parse::<Demo>(Some("backend=opencl"))).contains("unknown backend"));
        assert!(message(parse::<Demo>(Some("size=3 size=4"))).contains("\"size\" is given twice"));
    }

    #[test]
    fn defaults_read_back_to_the_defaults() {
        let d = defaults::<Demo>().unwrap();
        assert_eq!(d.last().unwrap(), &("backend", "auto".to_string()));
        let s: Vec<String> = d.iter().map(|(k, v)| format!("{k}=[{v}]")).collect();
        assert_eq!(parse::<Demo>(Some(&s.join(" "))).unwrap().0, Demo::default());
    }
}
