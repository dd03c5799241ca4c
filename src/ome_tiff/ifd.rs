//! TIFF image file directories (TIFF 6.0 section 2; BigTIFF: the same with 8-byte counts
//! and offsets), serialised by hand because the `tiff` crate's encoder writes strips only:
//! it has no tiles and no way to hang reduced-resolution directories under an image.
//!
//! A directory is laid out as its entry table, then the values that do not fit in an
//! entry, each on a word boundary; its size is known before any offset is, so the writer
//! can place every directory first and fill in the offsets that point between them.

/// TIFF field types used here (TIFF 6.0 section 2, BigTIFF's LONG8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Ascii = 2,
    Short = 3,
    Long = 4,
    Long8 = 16,
}

impl Kind {
    fn bytes(self) -> usize {
        match self {
            Kind::Ascii => 1,
            Kind::Short => 2,
            Kind::Long => 4,
            Kind::Long8 => 8,
        }
    }
}

/// One entry: a tag and its values, already encoded little-endian.
#[derive(Clone, Debug)]
struct Entry {
    tag: u16,
    kind: Kind,
    count: u64,
    data: Vec<u8>,
}

/// A directory under construction; entries are kept sorted by tag, as TIFF requires.
#[derive(Clone, Debug)]
pub struct Ifd {
    big: bool,
    entries: Vec<Entry>,
}

impl Ifd {
    pub fn new(big: bool) -> Self {
        Ifd { big, entries: Vec::new() }
    }

    /// The type that holds a file offset or byte count: LONG, or LONG8 in a BigTIFF.
    pub fn offset_kind(&self) -> Kind {
        if self.big { Kind::Long8 } else { Kind::Long }
    }

    /// Sets `tag` to unsigned `values` of `kind` (replacing an earlier value).
    pub fn set(&mut self, tag: u16, kind: Kind, values: &[u64]) {
        let mut data = Vec::with_capacity(values.len() * kind.bytes());
        for &v in values {
            match kind {
                Kind::Short => data.extend_from_slice(&(v as u16).to_le_bytes()),
                Kind::Long => data.extend_from_slice(&(v as u32).to_le_bytes()),
                Kind::Long8 => data.extend_from_slice(&v.to_le_bytes()),
                Kind::Ascii => data.push(v as u8),
            }
        }
        self.put(Entry { tag, kind, count: values.len() as u64, data });
    }

    /// Sets `tag` to an ASCII string (NUL-terminated, as TIFF stores it).
    pub fn set_ascii(&mut self, tag: u16, text: &str) {
        let mut data = text.as_bytes().to_vec();
        data.push(0);
        self.put(Entry { tag, kind: Kind::Ascii, count: data.len() as u64, data });
    }

    fn put(&mut self, e: Entry) {
        match self.entries.binary_search_by_key(&e.tag, |x| x.tag) {
            Ok(i) => self.entries[i] = e,
            Err(i) => self.entries.insert(i, e),
        }
    }

    /// Bytes of an entry's value field: 4, or 8 in a BigTIFF.
    fn inline(&self) -> usize {
        if self.big { 8 } else { 4 }
    }

    /// Bytes of the entry table: count, entries, next-directory offset.
    fn table_len(&self) -> usize {
        let n = self.entries.len();
        if self.big { 8 + 20 * n + 8 } else { 2 + 12 * n + 4 }
    }

    /// The directory's whole size, values included; it does not depend on where it goes.
    pub fn byte_len(&self) -> usize {
        let spill: usize = self.entries.iter().filter(|e| e.data.len() > self.inline()).map(|e| (e.data.len() + 1) & !1).sum();
        self.table_len() + spill
    }

    /// The directory serialised to sit at file offset `at` (even), the next directory of
    /// its chain at `next` (0: none).
    pub fn to_bytes(&self, at: u64, next: u64) -> Vec<u8> {
        let mut table = Vec::with_capacity(self.table_len());
        let mut spill = Vec::new();
        let spill_at = at + self.table_len() as u64;
        if self.big {
            table.extend_from_slice(&(self.entries.len() as u64).to_le_bytes());
        } else {
            table.extend_from_slice(&(self.entries.len() as u16).to_le_bytes());
        }
        for e in &self.entries {
            table.extend_from_slice(&e.tag.to_le_bytes());
            table.extend_from_slice(&(e.kind as u16).to_le_bytes());
            if self.big {
                table.extend_from_slice(&e.count.to_le_bytes());
            } else {
                table.extend_from_slice(&(e.count as u32).to_le_bytes());
            }
            let mut field = vec![0u8; self.inline()];
            if e.data.len() <= self.inline() {
                // Small values sit in the entry itself, left-justified.
                field[..e.data.len()].copy_from_slice(&e.data);
            } else {
                let off = spill_at + spill.len() as u64;
                field.copy_from_slice(&off.to_le_bytes()[..self.inline()]);
                spill.extend_from_slice(&e.data);
                if spill.len() % 2 == 1 {
                    spill.push(0);
                }
            }
            table.extend_from_slice(&field);
        }
        table.extend_from_slice(&next.to_le_bytes()[..self.inline()]);
        table.extend_from_slice(&spill);
        table
    }
}

/// The file header: byte order, version (42 or BigTIFF's 43) and the first directory's
/// offset (`first_ifd`; 0 until known).
pub fn header(big: bool, first_ifd: u64) -> Vec<u8> {
    let mut h = b"II".to_vec();
    if big {
        h.extend_from_slice(&43u16.to_le_bytes());
        h.extend_from_slice(&8u16.to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes());
        h.extend_from_slice(&first_ifd.to_le_bytes());
    } else {
        h.extend_from_slice(&42u16.to_le_bytes());
        h.extend_from_slice(&(first_ifd as u32).to_le_bytes());
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_inline_large_ones_spill_on_word_boundaries() {
        let mut d = Ifd::new(false);
        d.set(258, Kind::Short, &[8, 8, 8]);
        d.set(256, Kind::Long, &[7]);
        d.set_ascii(270, "ab");
        let b = d.to_bytes(100, 0);
        assert_eq!(b.len(), d.byte_len());
        assert_eq!(u16::from_le_bytes([b[0], b[1]]), 3);
        // Sorted: 256 first.
        assert_eq!(u16::from_le_bytes([b[2], b[3]]), 256);
        // BitsPerSample (6 bytes) spills right after the table (2 + 36 + 4 = 42).
        let off = u32::from_le_bytes(b[2 + 12 + 8..2 + 12 + 12].try_into().unwrap());
        assert_eq!(off, 142);
        assert_eq!(&b[42..48], &[8, 0, 8, 0, 8, 0]);
        // "ab\0" fits inline.
        assert_eq!(&b[2 + 24 + 8..2 + 24 + 11], b"ab\0");
        let mut big = Ifd::new(true);
        big.set(258, Kind::Short, &[8, 8, 8]);
        assert_eq!(big.byte_len(), 8 + 20 + 8);
        assert_eq!(header(true, 16).len(), 16);
        assert_eq!(header(false, 8).len(), 8);
    }
}
