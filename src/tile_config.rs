//! Fiji's tile configuration files (`TileConfiguration.txt`, as the Grid/Collection
//! stitching plugin and BigStitcher read and write them), so a mosaic moves between Fiji and
//! tessera: the nominal top-left corners of the tiles in, the registered ones out
//! ([`REGISTERED_NAME`], the name Fiji gives its own result).
//!
//! The format, line by line: blank lines and lines starting with `#` are comments; one line
//! `dim = 2` before the first tile; then one tile a line, `FILE; ; (X, Y)`: the image file
//! (relative to the configuration's folder), an empty second field (Fiji's series within a
//! multi-series file, which tessera does not read), and the tile's top-left corner in
//! pixels, x right and y down.

use anyhow::{anyhow, bail, Context, Result};
use std::path::{Component, Path, PathBuf};

/// The name Fiji gives the configuration of registered positions, beside the input's.
pub const REGISTERED_NAME: &str = "TileConfiguration.registered.txt";

/// One tile of a configuration: its file as written and its top-left corner (pixels).
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigTile {
    pub file: String,
    pub position: (f64, f64),
}

/// The tiles of a configuration's text; `name` (the file's) prefixes each error, which
/// names the line. Errors: a `dim` other than 2 or missing before the first tile, a line
/// that is not `FILE; ; (X, Y)`, a series number, a coordinate that is not a finite number,
/// no tile at all.
pub fn parse(text: &str, name: &str) -> Result<Vec<ConfigTile>> {
    let mut dim = None;
    let mut tiles = Vec::new();
    for (k, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let at = || format!("{name} line {}", k + 1);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix("dim") {
            let value = rest.trim_start().strip_prefix('=').map(str::trim).ok_or_else(|| anyhow!("{}: expected `dim = 2`, got {raw:?}", at()))?;
            match value.parse::<u32>() {
                Ok(2) => dim = Some(2),
                Ok(d) => bail!("{}: dim = {d}: only two-dimensional tile configurations (dim = 2) are read", at()),
                Err(_) => bail!("{}: expected `dim = 2`, got {raw:?}", at()),
            }
            continue;
        }
        if dim.is_none() {
            bail!("{}: a tile before the `dim = 2` line (a tile configuration starts with `dim = 2`)", at());
        }
        let fields: Vec<&str> = line.split(';').map(str::trim).collect();
        let [file, series, coords] = fields[..] else {
            bail!("{}: expected `FILE; ; (X, Y)` (three fields separated by `;`), got {raw:?}", at());
        };
        if file.is_empty() {
            bail!("{}: no file name before the first `;`", at());
        }
        if !series.is_empty() {
            bail!("{}: series {series:?} within a multi-series file: tessera reads one image per file (leave the second field empty)", at());
        }
        let inner = coords.strip_prefix('(').and_then(|c| c.strip_suffix(')')).ok_or_else(|| anyhow!("{}: expected the position as `(X, Y)`, got {coords:?}", at()))?;
        let numbers: Vec<&str> = inner.split(',').map(str::trim).collect();
        let [x, y] = numbers[..] else {
            bail!("{}: expected two coordinates `(X, Y)` for dim = 2, got {coords:?}", at());
        };
        let number = |s: &str| s.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| anyhow!("{}: {s:?} is not a finite number", at()));
        tiles.push(ConfigTile { file: file.to_string(), position: (number(x)?, number(y)?) });
    }
    if tiles.is_empty() {
        bail!("{name}: no tile (lines `FILE; ; (X, Y)` after `dim = 2`)");
    }
    Ok(tiles)
}

/// The tiles of the configuration file `path`, their files resolved against its folder.
/// Errors: as [`parse`], and an unreadable file.
pub fn read(path: &Path) -> Result<Vec<(PathBuf, (f64, f64))>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read the tile configuration {}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new(""));
    Ok(parse(&text, &path.display().to_string())?.into_iter().map(|t| (dir.join(&t.file), t.position)).collect())
}

/// The text of a configuration of `tiles` (file as it is to be written, top-left corner).
pub fn format(tiles: &[ConfigTile]) -> String {
    let mut s = String::from("# Tile positions registered by tessera (top-left corners, pixels)\n# Define the number of dimensions we are working on\ndim = 2\n\n# Define the image coordinates\n");
    for t in tiles {
        s.push_str(&format!("{}; ; ({}, {})\n", t.file, t.position.0, t.position.1));
    }
    s
}

/// Writes the configuration of `tiles` (`files[i]` at `positions[i]`) to `path`, each file
/// named relative to `path`'s folder (so Fiji finds it), through a temporary file beside
/// it renamed over it. Errors: lists of different lengths, a non-finite position, a file
/// that cannot be written.
pub fn write(path: &Path, files: &[PathBuf], positions: &[(f64, f64)]) -> Result<()> {
    if files.len() != positions.len() {
        bail!("{} files for {} positions", files.len(), positions.len());
    }
    if let Some(i) = positions.iter().position(|q| !(q.0.is_finite() && q.1.is_finite())) {
        bail!("tile {i}'s position {:?} is not finite", positions[i]);
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tiles: Vec<ConfigTile> = files.iter().zip(positions).map(|(f, &q)| ConfigTile { file: relative(dir, f), position: q }).collect();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let part = path.with_file_name(format!(".{name}.partial"));
    let done = std::fs::write(&part, format(&tiles)).and_then(|()| std::fs::rename(&part, path));
    if done.is_err() {
        let _ = std::fs::remove_file(&part);
    }
    done.with_context(|| format!("cannot write {}", path.display()))
}

/// `file` as a path relative to `dir` (with `..` where it lies elsewhere; both made
/// absolute against the working directory first), `/`-separated as Fiji writes them.
fn relative(dir: &Path, file: &Path) -> String {
    // Components of the absolute, lexically normalized path (`.` dropped, `..` taken back).
    let parts = |p: &Path| -> Vec<String> {
        let p = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        let mut out: Vec<String> = Vec::new();
        for c in p.components() {
            match c {
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
                Component::ParentDir => {
                    out.pop();
                }
                Component::Normal(n) => out.push(n.to_string_lossy().into_owned()),
            }
        }
        out
    };
    let (d, f) = (parts(dir), parts(file));
    let common = d.iter().zip(&f).take_while(|(a, b)| a == b).count();
    let up = std::iter::repeat_n("..".to_string(), d.len() - common);
    up.chain(f[common..].iter().cloned()).collect::<Vec<_>>().join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIJI: &str = "# Define the number of dimensions we are working on\ndim = 2\n\n# Define the image coordinates\ntile_00.tif; ; (0.0, 0.0)\ntile_01.tif; ; (921.6, -3.5)\n  tile_02.tif ;; ( 1843.2 , 0 )  \n";

    #[test]
    fn fiji_files_are_read_and_written_back() {
        let t = parse(FIJI, "TileConfiguration.txt").unwrap();
        assert_eq!(t.iter().map(|c| c.file.as_str()).collect::<Vec<_>>(), ["tile_00.tif", "tile_01.tif", "tile_02.tif"]);
        assert_eq!(t.iter().map(|c| c.position).collect::<Vec<_>>(), [(0.0, 0.0), (921.6, -3.5), (1843.2, 0.0)]);
        assert_eq!(parse(&format(&t), "again").unwrap(), t);
    }

    #[test]
    fn a_bad_file_is_an_error_naming_the_line() {
        for (text, says) in [
            ("dim = 3\na.tif; ; (0, 0, 0)\n", "x line 1: dim = 3"),
            ("a.tif; ; (0, 0)\n", "x line 1: a tile before the `dim = 2` line"),
            ("dim = 2\na.tif; (0, 0)\n", "x line 2: expected `FILE; ; (X, Y)`"),
            ("dim = 2\n\na.tif; ; 0, 0\n", "x line 3: expected the position as `(X, Y)`"),
            ("dim = 2\na.tif; ; (0, zero)\n", "x line 2: \"zero\" is not a finite number"),
            ("dim = 2\na.tif; ; (0, NaN)\n", "x line 2: \"NaN\" is not a finite number"),
            ("dim = 2\na.tif; ; (0, 1, 2)\n", "x line 2: expected two coordinates"),
            ("dim = 2\na.czi; 3; (0, 0)\n", "x line 2: series \"3\""),
            ("dim = 2\n; ; (0, 0)\n", "x line 2: no file name"),
            ("dim = two\n", "x line 1: expected `dim = 2`"),
            ("# nothing\ndim = 2\n", "x: no tile"),
        ] {
            let e = format!("{:#}", parse(text, "x").unwrap_err());
            assert!(e.starts_with(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn written_names_are_relative_to_the_configuration() {
        let d = std::env::temp_dir().join(format!("tessera-tile-config-{}", std::process::id()));
        std::fs::create_dir_all(d.join("tiles")).unwrap();
        let out = d.join("out").join(REGISTERED_NAME);
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        let files = [d.join("tiles/a.png"), d.join("out/./b.png")];
        write(&out, &files, &[(0.0, 0.0), (10.25, -2.0)]).unwrap();
        let back = read(&out).unwrap();
        assert_eq!(back.iter().map(|t| t.1).collect::<Vec<_>>(), [(0.0, 0.0), (10.25, -2.0)]);
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.contains("\n../tiles/a.png; ; (0, 0)\n") && text.contains("\nb.png; ; (10.25, -2)\n"), "{text}");
        assert!(write(&out, &files, &[(0.0, f64::NAN), (0.0, 0.0)]).is_err());
        assert!(write(&out, &files[..1], &[(0.0, 0.0), (0.0, 0.0)]).is_err());
        let _ = std::fs::remove_dir_all(&d);
    }
}
