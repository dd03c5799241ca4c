//! The Portable Float Map, the format of Middlebury's disparity maps: a text header
//! `Pf\n<width> <height>\n<scale>\n` (`Pf` = one channel; a negative scale = little-endian
//! floats), then the rows of 32-bit floats from the BOTTOM row up. Written by hand: it is a
//! three-line header and raw floats.

use tessera_core::error::{Error, Result};
use tessera_core::image::{Image, ImageView};

/// One-channel little-endian PFM of `img` (scale -1.0).
pub fn encode_pfm(img: ImageView<'_, f32>) -> Vec<u8> {
    let (w, h) = img.size();
    let header = format!("Pf\n{w} {h}\n-1.0\n");
    let mut out = Vec::with_capacity(header.len() + 4 * w * h);
    out.extend_from_slice(header.as_bytes());
    for y in (0..h).rev() {
        for v in img.row(y) {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

fn bad(reason: String) -> Error {
    Error::InvalidParameter { name: "PFM", reason }
}

/// Reads a one-channel PFM (either byte order). Errors: not `Pf` (colour `PF` included),
/// a malformed header, a zero size, a scale of 0 or not a number, truncated data.
pub fn decode_pfm(bytes: &[u8]) -> Result<Image<f32>> {
    // Three whitespace-separated header fields after the magic, then one whitespace byte.
    let mut pos = 0;
    let token = |pos: &mut usize| -> Result<String> {
        while *pos < bytes.len() && bytes[*pos].is_ascii_whitespace() {
            *pos += 1;
        }
        let start = *pos;
        while *pos < bytes.len() && !bytes[*pos].is_ascii_whitespace() {
            *pos += 1;
        }
        if start == *pos || *pos - start > 32 {
            return Err(bad("truncated or malformed header".into()));
        }
        Ok(String::from_utf8_lossy(&bytes[start..*pos]).into_owned())
    };
    let magic = token(&mut pos)?;
    if magic != "Pf" {
        return Err(bad(format!("magic {magic:?}: only one-channel 'Pf' maps are supported")));
    }
    let w: usize = token(&mut pos)?.parse().map_err(|_| bad("width is not a number".into()))?;
    let h: usize = token(&mut pos)?.parse().map_err(|_| bad("height is not a number".into()))?;
    let scale: f64 = token(&mut pos)?.parse().map_err(|_| bad("scale is not a number".into()))?;
    if !scale.is_finite() || scale == 0.0 {
        return Err(bad(format!("scale {scale} must be a non-zero number")));
    }
    pos += 1; // the single whitespace byte ending the header
    let n = w.checked_mul(h).and_then(|n| n.checked_mul(4)).ok_or_else(|| bad("size overflows".into()))?;
    let data = bytes.get(pos..).unwrap_or(&[]);
    if w == 0 || h == 0 {
        return Err(Error::ZeroSize { width: w, height: h });
    }
    if data.len() < n {
        return Err(Error::BufferTooShort { needed: n, got: data.len() });
    }
    let little = scale < 0.0;
    let mut img = Image::<f32>::new(w, h)?;
    for y in 0..h {
        let src = &data[(h - 1 - y) * w * 4..(h - y) * w * 4];
        for (o, c) in img.row_mut(y).iter_mut().zip(src.chunks_exact(4)) {
            let b = [c[0], c[1], c[2], c[3]];
            *o = if little { f32::from_le_bytes(b) } else { f32::from_be_bytes(b) };
        }
    }
    Ok(img)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_layout() {
        let img = Image::from_fn(3, 2, |x, y| if x == 2 && y == 0 { f32::INFINITY } else { (y * 3 + x) as f32 + 0.5 }).unwrap();
        let b = encode_pfm(img.view());
        assert!(b.starts_with(b"Pf\n3 2\n-1.0\n"));
        // First stored row is the bottom one.
        let body = &b[b.len() - 24..];
        assert_eq!(f32::from_le_bytes([body[0], body[1], body[2], body[3]]), 3.5);
        assert_eq!(decode_pfm(&b).unwrap(), img);
    }

    #[test]
    fn big_endian_input() {
        let mut b = b"Pf\n1 2\n1.0\n".to_vec();
        b.extend_from_slice(&2.0f32.to_be_bytes());
        b.extend_from_slice(&1.0f32.to_be_bytes());
        let img = decode_pfm(&b).unwrap();
        assert_eq!(img.as_slice(), &[1.0, 2.0]);
    }

    #[test]
    fn rejects_bad_files() {
        assert!(decode_pfm(b"PF\n1 1\n-1.0\n\0\0\0\0\0\0\0\0\0\0\0\0").is_err());
        assert!(decode_pfm(b"Pf\n2 2\n-1.0\n\0\0\0\0").is_err());
        assert!(decode_pfm(b"Pf\nx 2\n-1.0\n").is_err());
        assert!(decode_pfm(b"Pf\n1 1\n0\n\0\0\0\0").is_err());
        assert!(decode_pfm(b"Pf\n0 1\n-1\n").is_err());
        assert!(decode_pfm(b"").is_err());
    }
}
