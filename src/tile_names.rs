//! Tiles named by a pattern, as microscopes and Fiji's Grid/Collection stitching
//! ("filename defined position") and MIST name them: `scan/img_r{yy}_c{xx}_ch{c}.tif`.
//!
//! Fields: `{x}` the column and `{y}` the row (numbered from any start: the smallest found
//! is the first), `{i}` the tile's index in acquisition order, `{c}` the channel, `{t}` the
//! time point (or cycle). A field of one letter matches any run of digits, of several
//! (`{iii}`) exactly that many; `*` matches any text (right after `{c}` or `{t}`, the
//! channel's or time point's name: `w{c}*` for `w1DAPI`, `w2GFP`). Channels and time points are
//! numbered, like tiles, by their order, so `ch1`/`ch2` and `ch0`/`ch5` both make two
//! channels. The files come out in the order the grid takes them: time point by time
//! point, channel by channel within each, the tiles in acquisition order within each
//! (row by row where the names give columns and rows; by natural order of the rest of the
//! name where they give neither).

use crate::frames::{is_image_name, natural_cmp};
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Tiles a pattern names (module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct NamedTiles {
    /// Time point by time point, channel by channel, tile by tile (module doc).
    pub files: Vec<PathBuf>,
    pub channels: usize,
    pub time_points: usize,
    /// Columns and rows where the names give them (`{x}` and `{y}`).
    pub grid: Option<(usize, usize)>,
}

/// Whether `path`'s file name is a tile-name pattern: it holds a `{...}` field and names no
/// existing file.
pub fn is_pattern(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name.contains('{') && name.contains('}') && !path.exists()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Token {
    Literal(char),
    /// `*`; `label`: right after a channel or time field, the name that follows its
    /// number (`w{c}*` for `w1DAPI`), which does not tell tiles apart.
    Any { label: bool },
    Field { letter: char, digits: Option<usize> },
}

const LETTERS: [char; 5] = ['x', 'y', 'i', 'c', 't'];

fn parse(pattern: &str) -> Result<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut chars = pattern.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '*' => {
                let label = matches!(tokens.last(), Some(Token::Field { letter: 'c' | 't', .. }));
                tokens.push(Token::Any { label })
            }
            '{' => {
                let field: String = chars.by_ref().take_while(|&c| c != '}').collect();
                let letter = field.chars().next().unwrap_or(' ');
                if !LETTERS.contains(&letter) || field.chars().any(|c| c != letter) {
                    bail!("pattern {pattern}: field {{{field}}} is not one of {{x}} (column), {{y}} (row), {{i}} (tile), {{c}} (channel), {{t}} (time point), each letter repeated for a fixed number of digits");
                }
                if tokens.iter().any(|t| matches!(t, Token::Field { letter: l, .. } if *l == letter)) {
                    bail!("pattern {pattern}: field {{{letter}}} appears twice");
                }
                tokens.push(Token::Field { letter, digits: (field.len() > 1).then_some(field.len()) });
            }
            '}' => bail!("pattern {pattern}: a '}}' without its '{{'"),
            c => tokens.push(Token::Literal(c)),
        }
    }
    let has = |l: char| tokens.iter().any(|t| matches!(t, Token::Field { letter, .. } if *letter == l));
    if has('x') != has('y') {
        bail!("pattern {pattern}: give both {{x}} (column) and {{y}} (row), or neither");
    }
    if has('i') && has('x') {
        bail!("pattern {pattern}: give the tile by {{i}} or by {{x}} and {{y}}, not both");
    }
    Ok(tokens)
}

/// The fields' values and the name with the channel and time fields taken out (what tells
/// tiles apart when no position field does), when `name` matches `tokens`.
fn matches(tokens: &[Token], name: &[char], fields: &mut Vec<(char, u64)>, rest: &mut String) -> bool {
    let Some((&first, more)) = tokens.split_first() else { return name.is_empty() };
    match first {
        Token::Literal(c) => name.first() == Some(&c) && {
            rest.push(c);
            matches(more, &name[1..], fields, rest) || {
                rest.pop();
                false
            }
        },
        Token::Any { label } => (0..=name.len()).any(|k| {
            let len = rest.len();
            if !label {
                rest.extend(&name[..k]);
            }
            matches(more, &name[k..], fields, rest) || {
                rest.truncate(len);
                false
            }
        }),
        Token::Field { letter, digits } => {
            let run = name.iter().take_while(|c| c.is_ascii_digit()).count();
            let lengths: Vec<usize> = match digits {
                Some(n) if n <= run => vec![n],
                Some(_) => vec![],
                None => (1..=run).rev().collect(),
            };
            lengths.into_iter().any(|k| {
                let Ok(value) = name[..k].iter().collect::<String>().parse::<u64>() else { return false };
                let len = rest.len();
                if !matches!(letter, 'c' | 't') {
                    rest.extend(&name[..k]);
                }
                fields.push((letter, value));
                matches(more, &name[k..], fields, rest) || {
                    fields.pop();
                    rest.truncate(len);
                    false
                }
            })
        }
    }
}

/// The tiles `pattern` names (a path whose file name is the pattern; module doc).
/// Errors: a bad pattern, no file matching it, a tile missing from a channel or time point
/// (named), a grid position given twice or missing.
pub fn resolve(pattern: &Path) -> Result<NamedTiles> {
    let text = pattern.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tokens = parse(&text)?;
    let dir = pattern.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let entries = std::fs::read_dir(dir).with_context(|| format!("cannot read the folder {} of the pattern", dir.display()))?;
    // (time point, channel, tile key) -> file.
    let mut found: BTreeMap<(u64, u64, TileKey), PathBuf> = BTreeMap::new();
    for entry in entries {
        let path = entry?.path();
        if !path.is_file() || !is_image_name(&path) {
            continue;
        }
        let name: Vec<char> = path.file_name().map(|n| n.to_string_lossy().chars().collect()).unwrap_or_default();
        let (mut fields, mut rest) = (Vec::new(), String::new());
        if !matches(&tokens, &name, &mut fields, &mut rest) {
            continue;
        }
        let get = |l: char| fields.iter().find(|f| f.0 == l).map(|f| f.1);
        let key = match (get('i'), get('x'), get('y')) {
            (Some(i), _, _) => TileKey::Index(i),
            (None, Some(x), Some(y)) => TileKey::Cell(y, x),
            _ => TileKey::Name(rest),
        };
        if let Some(other) = found.insert((get('t').unwrap_or(0), get('c').unwrap_or(0), key.clone()), path.clone()) {
            bail!("{} and {} are the same tile of pattern {text}", other.display(), path.display());
        }
    }
    if found.is_empty() {
        bail!("pattern {} matches no image file", pattern.display());
    }
    let times: BTreeSet<u64> = found.keys().map(|k| k.0).collect();
    let channels: BTreeSet<u64> = found.keys().map(|k| k.1).collect();
    let mut tiles: Vec<TileKey> = found.keys().map(|k| k.2.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    tiles.sort_by(|a, b| a.order(b));
    let mut files = Vec::with_capacity(found.len());
    for &t in &times {
        for &c in &channels {
            for key in &tiles {
                match found.get(&(t, c, key.clone())) {
                    Some(f) => files.push(f.clone()),
                    None => {
                        let example = found.iter().find(|(k, _)| k.2 == *key).map(|(_, f)| f.display().to_string()).unwrap_or_default();
                        bail!("pattern {text}: the tile of {example} has no file for channel {c}, time point {t} (every tile needs one in every channel and time point)");
                    }
                }
            }
        }
    }
    let grid = match tiles.first() {
        Some(TileKey::Cell(..)) => {
            let cols: BTreeSet<u64> = tiles.iter().filter_map(|k| if let TileKey::Cell(_, x) = k { Some(*x) } else { None }).collect();
            let rows: BTreeSet<u64> = tiles.iter().filter_map(|k| if let TileKey::Cell(y, _) = k { Some(*y) } else { None }).collect();
            if cols.len() * rows.len() != tiles.len() {
                bail!("pattern {text}: the names give {} columns and {} rows but {} tiles: every cell of the grid needs a tile", cols.len(), rows.len(), tiles.len());
            }
            Some((cols.len(), rows.len()))
        }
        _ => None,
    };
    Ok(NamedTiles { files, channels: channels.len(), time_points: times.len(), grid })
}

/// What tells one tile from another in the names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TileKey {
    Index(u64),
    /// Row, column.
    Cell(u64, u64),
    /// The name without its channel and time fields.
    Name(String),
}

impl TileKey {
    /// Acquisition order: by index, row by row, or by natural order of the names.
    fn order(&self, other: &TileKey) -> std::cmp::Ordering {
        match (self, other) {
            (TileKey::Name(a), TileKey::Name(b)) => natural_cmp(a, b),
            _ => self.cmp(other),
        }
    }
}

impl NamedTiles {
    /// The channels, time points and cycles of a run on these tiles, where the faces may
    /// also give them (1: not given): the names' counts, the time field counting cycles
    /// when `cycles` is asked for. Errors: a count given that differs from the names'.
    pub fn planes(&self, channels: usize, time_points: usize, cycles: usize) -> Result<(usize, usize, usize)> {
        let agree = |given: usize, named: usize, what: &str| -> Result<usize> {
            if given > 1 && given != named {
                bail!("{given} {what} given, but the file names give {named}");
            }
            Ok(named)
        };
        let channels = agree(channels, self.channels, "channels")?;
        if cycles > 1 {
            Ok((channels, 1, agree(cycles, self.time_points, "cycles")?))
        } else {
            Ok((channels, agree(time_points, self.time_points, "time points")?, 1))
        }
    }

    /// The grid `COLSxROWS` of a run where the faces may give one: the names' where they
    /// give columns and rows, else `given`. Errors: a grid given that differs from the
    /// names', or an acquisition order or start corner other than the default with one
    /// (the names place each tile: `custom_order`).
    pub fn grid(&self, given: Option<&str>, custom_order: bool) -> Result<Option<String>> {
        let Some((cols, rows)) = self.grid else { return Ok(given.map(str::to_owned)) };
        let named = format!("{cols}x{rows}");
        if given.is_some_and(|g| g != named) {
            bail!("grid {} given, but the file names give {named}", given.unwrap_or_default());
        }
        if custom_order {
            bail!("the file names give each tile's column and row: an acquisition order or start corner does not apply");
        }
        Ok(Some(named))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of empty files named `names`, its own per test (`tag`).
    fn folder(tag: &str, names: &[&str]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tessera-tile-names-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for n in names {
            std::fs::write(dir.join(n), b"").unwrap();
        }
        dir
    }

    fn names(t: &NamedTiles) -> Vec<String> {
        t.files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn columns_rows_and_channels_come_out_row_by_row_in_channel_blocks() {
        let mut all = Vec::new();
        for c in [1, 2] {
            for y in 0..2 {
                for x in 0..3 {
                    all.push(format!("img_r{y:02}_c{x:02}_ch{c}.tif"));
                }
            }
        }
        let dir = folder("cells", &all.iter().map(String::as_str).chain(["notes.txt", "img_r00_c00.tif"]).collect::<Vec<_>>());
        let t = resolve(&dir.join("img_r{yy}_c{xx}_ch{c}.tif")).unwrap();
        assert_eq!((t.channels, t.time_points, t.grid), (2, 1, Some((3, 2))));
        assert_eq!(names(&t)[..4], ["img_r00_c00_ch1.tif", "img_r00_c01_ch1.tif", "img_r00_c02_ch1.tif", "img_r01_c00_ch1.tif"]);
        assert_eq!(names(&t)[6], "img_r00_c00_ch2.tif");
        assert_eq!(t.grid(None, false).unwrap().as_deref(), Some("3x2"));
        assert!(t.grid(Some("2x3"), false).is_err() && t.grid(None, true).is_err());
        assert_eq!(t.planes(1, 1, 1).unwrap(), (2, 1, 1));
        assert!(t.planes(3, 1, 1).is_err());
    }

    #[test]
    fn an_index_orders_the_tiles_and_a_time_field_counts_time_points_or_cycles() {
        let dir = folder("index", &["s_t1_i9.tif", "s_t1_i10.tif", "s_t2_i9.tif", "s_t2_i10.tif"]);
        let t = resolve(&dir.join("s_t{t}_i{i}.tif")).unwrap();
        assert_eq!(names(&t), ["s_t1_i9.tif", "s_t1_i10.tif", "s_t2_i9.tif", "s_t2_i10.tif"]);
        assert_eq!((t.channels, t.time_points, t.grid), (1, 2, None));
        assert_eq!(t.planes(1, 1, 2).unwrap(), (1, 1, 2));
        assert_eq!(t.grid(Some("2x1"), true).unwrap().as_deref(), Some("2x1"));
    }

    #[test]
    fn without_position_fields_the_rest_of_the_name_orders_the_tiles() {
        let dir = folder("rest", &["b10_w1DAPI.tif", "b2_w1DAPI.tif", "b10_w2GFP.tif", "b2_w2GFP.tif"]);
        let t = resolve(&dir.join("b*_w{c}*.tif")).unwrap();
        assert_eq!(names(&t), ["b2_w1DAPI.tif", "b10_w1DAPI.tif", "b2_w2GFP.tif", "b10_w2GFP.tif"]);
        assert_eq!(t.channels, 2);
    }

    #[test]
    fn fixed_digits_bad_patterns_and_missing_tiles_are_errors_that_say_so() {
        let dir = folder("errors", &["t_001.tif", "t_2.tif", "u_c1_0.tif", "u_c1_1.tif", "u_c2_0.tif", "v_0_0.tif", "v_1_1.tif"]);
        let t = resolve(&dir.join("t_{iii}.tif")).unwrap();
        assert_eq!(names(&t), ["t_001.tif"]);
        let err = |p: &str| format!("{:#}", resolve(&dir.join(p)).unwrap_err());
        assert!(err("u_c{c}_{i}.tif").contains("no file for channel 2"), "{}", err("u_c{c}_{i}.tif"));
        assert!(err("v_{y}_{x}.tif").contains("every cell"), "{}", err("v_{y}_{x}.tif"));
        assert!(err("w_{i}.tif").contains("matches no image file"));
        assert!(err("t_{q}.tif").contains("is not one of"));
        assert!(err("t_{x}.tif").contains("both {x}"));
        assert!(err("t_{i}_{x}_{y}.tif").contains("not both"));
        assert!(err("t_{i}_{i}.tif").contains("twice"));
        assert!(err("t_i}.tif").contains("without"));
        assert!(is_pattern(&dir.join("t_{i}.tif")) && !is_pattern(&dir.join("t_001.tif")));
    }
}
