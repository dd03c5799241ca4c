//! The OME-XML metadata of a single-plane image (OME schema 2016-06), stored in the first
//! directory's ImageDescription: what Bio-Formats, QuPath and napari read the size, pixel
//! type, channels and physical pixel size from. Plain ASCII (non-ASCII characters of the
//! name become character references), since a TIFF ASCII field is 7-bit.

/// What the metadata describes.
pub struct Pixels<'a> {
    pub name: &'a str,
    pub size: (usize, usize),
    /// OME's type name: `uint8`, `uint16`, `float`.
    pub type_name: &'static str,
    /// Samples per pixel: 1 (gray) or 3 (RGB, interleaved).
    pub samples: usize,
    /// Micrometres per pixel (OME's default unit for PhysicalSizeX/Y).
    pub pixel_size_um: Option<f64>,
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => out.push_str(&format!("&#{};", c as u32)),
        }
    }
    out
}

/// The OME-XML document for `p`.
pub fn ome_xml(p: &Pixels<'_>) -> String {
    let physical = p.pixel_size_um.map_or(String::new(), |s| format!(r#" PhysicalSizeX="{s}" PhysicalSizeY="{s}""#));
    // An RGB image is one channel of three interleaved samples, as Bio-Formats writes it.
    format!(
        concat!(
            r#"<?xml version="1.0" encoding="UTF-8"?>"#,
            r#"<OME xmlns="http://www.openmicroscopy.org/Schemas/OME/2016-06" "#,
            r#"xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" "#,
            r#"xsi:schemaLocation="http://www.openmicroscopy.org/Schemas/OME/2016-06 http://www.openmicroscopy.org/Schemas/OME/2016-06/ome.xsd" "#,
            r#"Creator="tessera {version}">"#,
            r#"<Image ID="Image:0" Name="{name}">"#,
            r#"<Pixels ID="Pixels:0" DimensionOrder="XYCZT" Type="{ty}" SizeX="{w}" SizeY="{h}" SizeC="{c}" SizeZ="1" SizeT="1"{physical} Interleaved="{il}" BigEndian="false">"#,
            r#"<Channel ID="Channel:0:0" SamplesPerPixel="{c}"><LightPath/></Channel>"#,
            r#"<TiffData IFD="0" PlaneCount="1"/>"#,
            r#"</Pixels></Image></OME>"#
        ),
        version = env!("CARGO_PKG_VERSION"),
        name = escape(p.name),
        ty = p.type_name,
        w = p.size.0,
        h = p.size.1,
        c = p.samples,
        il = p.samples > 1,
        physical = physical,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_type_and_pixel_size_are_stated_in_ascii() {
        let x = ome_xml(&Pixels { name: "a<b> µ", size: (30, 20), type_name: "uint16", samples: 1, pixel_size_um: Some(0.65) });
        assert!(x.is_ascii());
        for want in [r#"SizeX="30""#, r#"SizeY="20""#, r#"Type="uint16""#, r#"PhysicalSizeX="0.65""#, r#"SizeC="1""#, "a&lt;b&gt; &#181;"] {
            assert!(x.contains(want), "{want} missing in {x}");
        }
        let x = ome_xml(&Pixels { name: "", size: (1, 1), type_name: "uint8", samples: 3, pixel_size_um: None });
        assert!(x.contains(r#"SamplesPerPixel="3""#) && x.contains(r#"Interleaved="true""#) && !x.contains("Physical"));
    }
}
