//! The OME-XML metadata of an image of one or more planes (OME schema 2016-06), stored in the first
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
    /// Channels (gray planes) and time points: the planes, channel by channel within each
    /// time point (XYCZT), one directory each in that order.
    pub channels: usize,
    pub times: usize,
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
    let (size_c, channels) = if p.samples > 1 {
        (p.samples, format!(r#"<Channel ID="Channel:0:0" SamplesPerPixel="{}"><LightPath/></Channel>"#, p.samples))
    } else {
        (p.channels, (0..p.channels).map(|k| format!(r#"<Channel ID="Channel:0:{k}" SamplesPerPixel="1"><LightPath/></Channel>"#)).collect())
    };
    format!(
        concat!(
            r#"<?xml version="1.0" encoding="UTF-8"?>"#,
            r#"<OME xmlns="http://www.openmicroscopy.org/Schemas/OME/2016-06" "#,
            r#"xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" "#,
            r#"xsi:schemaLocation="http://www.openmicroscopy.org/Schemas/OME/2016-06 http://www.openmicroscopy.org/Schemas/OME/2016-06/ome.xsd" "#,
            r#"Creator="tessera {version}">"#,
            r#"<Image ID="Image:0" Name="{name}">"#,
            r#"<Pixels ID="Pixels:0" DimensionOrder="XYCZT" Type="{ty}" SizeX="{w}" SizeY="{h}" SizeC="{c}" SizeZ="1" SizeT="{t}"{physical} Interleaved="{il}" BigEndian="false">"#,
            "{channels}",
            r#"<TiffData IFD="0" PlaneCount="{planes}"/>"#,
            r#"</Pixels></Image></OME>"#
        ),
        version = env!("CARGO_PKG_VERSION"),
        name = escape(p.name),
        ty = p.type_name,
        w = p.size.0,
        h = p.size.1,
        c = size_c,
        t = p.times,
        il = p.samples > 1,
        physical = physical,
        channels = channels,
        planes = p.channels * p.times,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_type_and_pixel_size_are_stated_in_ascii() {
        let x = ome_xml(&Pixels { name: "a<b> µ", size: (30, 20), type_name: "uint16", samples: 1, pixel_size_um: Some(0.65), channels: 1, times: 1 });
        assert!(x.is_ascii());
        for want in [r#"SizeX="30""#, r#"SizeY="20""#, r#"Type="uint16""#, r#"PhysicalSizeX="0.65""#, r#"SizeC="1""#, "a&lt;b&gt; &#181;"] {
            assert!(x.contains(want), "{want} missing in {x}");
        }
        let x = ome_xml(&Pixels { name: "", size: (1, 1), type_name: "uint8", samples: 3, pixel_size_um: None, channels: 1, times: 1 });
        assert!(x.contains(r#"SamplesPerPixel="3""#) && x.contains(r#"Interleaved="true""#) && !x.contains("Physical"));
        // Two channels over three time points: six planes.
        let x = ome_xml(&Pixels { name: "", size: (8, 8), type_name: "uint16", samples: 1, pixel_size_um: None, channels: 2, times: 3 });
        for want in [r#"SizeC="2""#, r#"SizeT="3""#, r#"ID="Channel:0:1""#, r#"PlaneCount="6""#] {
            assert!(x.contains(want), "{want} missing in {x}");
        }
    }
}
