//! Reading the QR codes of `GET /api/v1/links/{code}/qr` back to their text, for the sidecar's
//! API tests and the end-to-end test through nginx.

/// Decodes the one QR code in a greyscale image.
fn decode(width: usize, height: usize, dark: impl Fn(usize, usize) -> bool) -> String {
    let mut image = rqrr::PreparedImage::prepare_from_greyscale(width, height, |x, y| {
        if dark(x, y) {
            0
        } else {
            255
        }
    });
    let grids = image.detect_grids();
    assert_eq!(grids.len(), 1, "one QR code in the image");
    grids[0].decode().expect("a readable QR code").1
}

/// The width and text of the QR code in a greyscale PNG.
pub fn decode_png(bytes: &[u8]) -> (u32, String) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!(info.color_type, png::ColorType::Grayscale);
    let width = info.width as usize;
    let text = decode(width, info.height as usize, |x, y| {
        pixels[y * width + x] < 128
    });
    (info.width, text)
}

/// The text of the QR code in an SVG rendering: reads the modules back from the SVG's geometry (`M{x} {y}h{run}...` runs in a viewBox of
/// modules) and decodes them drawn 4 pixels a module.
pub fn decode_svg(svg: &str) -> String {
    let view_box = svg.split("viewBox=\"0 0 ").nth(1).unwrap();
    let modules: usize = view_box.split(' ').next().unwrap().parse().unwrap();
    let path = svg
        .split(" d=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let mut dark = vec![false; modules * modules];
    for run in path.split('M').filter(|run| !run.is_empty()) {
        let (x, rest) = run.split_once(' ').unwrap();
        let (y, rest) = rest.split_once('h').unwrap();
        let length = rest.split('v').next().unwrap();
        let (x, y, length): (usize, usize, usize) = (
            x.parse().unwrap(),
            y.parse().unwrap(),
            length.parse().unwrap(),
        );
        for module in x..x + length {
            dark[y * modules + module] = true;
        }
    }
    let scale = 4;
    decode(modules * scale, modules * scale, |x, y| {
        dark[(y / scale) * modules + x / scale]
    })
}
