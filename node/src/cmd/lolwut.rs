//! LOLWUT [VERSION v] [args...]: Redis 7.0's computer art. The version picks the piece as
//! Redis's lolwut.c does: 5 draws Georg Nees's "Schotter" in braille characters, 6 a city
//! skyline in terminal colours, any other (7.0's own default) only the version line.
//! Both pieces use random numbers past their first rows, so only the deterministic parts
//! can equal redis-server's bytes; the geometry follows Redis's float and int steps exactly.

use rand::Rng;

use super::{arg_i64, CmdResult, CommandSpec, Ctx};

pub fn commands() -> Vec<CommandSpec> {
    vec![
        CommandSpec::new("lolwut", -1, "readonly fast", (0, 0, 0), lolwut)
            .group("server")
            .since("5.0.0"),
    ]
}

/// Which piece a version string selects (Redis's checks on its first three characters).
enum Piece {
    Schotter,
    Skyline,
    VersionOnly,
}

fn piece_for(v: &str) -> Piece {
    let b = v.as_bytes();
    let c = |i: usize| b.get(i).copied().unwrap_or(0);
    if (c(0) == b'5' && c(1) == b'.' && c(2) != b'9')
        || (c(0) == b'4' && c(1) == b'.' && c(2) == b'9')
    {
        Piece::Schotter
    } else if (c(0) == b'6' && c(1) == b'.' && c(2) != b'9')
        || (c(0) == b'5' && c(1) == b'.' && c(2) == b'9')
    {
        Piece::Skyline
    } else {
        Piece::VersionOnly
    }
}

fn lolwut(ctx: &mut Ctx<'_>, args: &[&[u8]]) -> CmdResult {
    let mut rest = args.get(1..).unwrap_or(&[]);
    let mut version = crate::REDIS_VERSION.to_string();
    if rest.len() >= 2 && rest[0].eq_ignore_ascii_case(b"version") {
        // Redis prints the number as an unsigned int: -1 is 4294967295, 2^32+5 is 5.
        version = format!("{}.0.0", arg_i64(rest[1])? as u32);
        rest = &rest[2..];
    }
    let text = match piece_for(&version) {
        Piece::Schotter => {
            let cols = clamp_arg(rest.first(), 66, 1000)?;
            let per_row = clamp_arg(rest.get(1), 8, 200)?;
            let per_col = clamp_arg(rest.get(2), 12, 200)?;
            let mut t = render_braille(&schotter(cols, per_row, per_col));
            t.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
            t
        }
        Piece::Skyline => {
            let cols = clamp_arg(rest.first(), 80, 1000)?;
            let rows = clamp_arg(rest.get(1), 20, 1000)?;
            let mut canvas = Canvas::new(cols, rows, 3);
            skyline(&mut canvas);
            let mut t = render_colors(&canvas);
            t.push_str(
                "\nDedicated to the 8 bit game developers of past and present.\n\
                 Original 8 bit image from Plaguemon by hikikomori. Redis ver. ",
            );
            t
        }
        Piece::VersionOnly => "Redis ver. ".to_string(),
    };
    let text = format!("{text}{}\n", crate::REDIS_VERSION);
    ctx.out.verbatim(text.as_bytes(), "txt");
    Ok(())
}

/// An optional integer argument, clamped to 1..=max as Redis does (`default` when absent).
fn clamp_arg(arg: Option<&&[u8]>, default: i64, max: i64) -> Result<i32, super::CmdError> {
    let n = match arg {
        Some(a) => arg_i64(a)?,
        None => default,
    };
    Ok(n.clamp(1, max) as i32)
}

/// Redis's truncated square root of 2: not `SQRT_2`, whose last digits can move a corner.
#[allow(clippy::approx_constant)]
const REDIS_SQRT_2: f64 = 1.4142135623;

/// C's `rand()`: 0..=RAND_MAX (2^31 - 1).
fn crand() -> i32 {
    rand::rng().random_range(0..=i32::MAX)
}

/// Pixels of one colour each (0 to 3), row-major; drawing outside is ignored.
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, bg: u8) -> Canvas {
        let (w, h) = (width.max(0) as usize, height.max(0) as usize);
        Canvas {
            width,
            height,
            pixels: vec![bg; w.saturating_mul(h)],
        }
    }

    fn index(&self, x: i32, y: i32) -> Option<usize> {
        if x < 0 || y < 0 || x >= self.width || y >= self.height {
            return None;
        }
        Some(x as usize + y as usize * self.width as usize)
    }

    fn set(&mut self, x: i32, y: i32, color: u8) {
        if let Some(p) = self.index(x, y).and_then(|i| self.pixels.get_mut(i)) {
            *p = color;
        }
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        self.index(x, y)
            .and_then(|i| self.pixels.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// Bresenham, as Redis's lwDrawLine.
    fn line(&mut self, mut x1: i32, mut y1: i32, x2: i32, y2: i32, color: u8) {
        let dx = (x2 - x1).abs();
        let dy = (y2 - y1).abs();
        let sx = if x1 < x2 { 1 } else { -1 };
        let sy = if y1 < y2 { 1 } else { -1 };
        let mut err = dx - dy;
        loop {
            self.set(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square centred on x,y, rotated by `angle`: Redis's lwDrawSquare, with its mix of
    /// float and double steps (they decide which pixel a corner lands on).
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32, color: u8) {
        let size = (f64::from(size) / REDIS_SQRT_2) as f32;
        let size = f64::from(size).round() as f32;
        let mut k = (std::f64::consts::PI / 4.0 + f64::from(angle)) as f32;
        let (mut px, mut py) = ([0i32; 4], [0i32; 4]);
        for j in 0..4 {
            px[j] = (f64::from(k).sin() * f64::from(size) + f64::from(x)).round() as i32;
            py[j] = (f64::from(k).cos() * f64::from(size) + f64::from(y)).round() as i32;
            k = (f64::from(k) + std::f64::consts::PI / 2.0) as f32;
        }
        for j in 0..4 {
            self.line(px[j], py[j], px[(j + 1) % 4], py[(j + 1) % 4], color);
        }
    }
}

/// Georg Nees's "Schotter": rows of squares, more and more rotated and moved further down
/// (the first two rows stay straight).
fn schotter(cols: i32, per_row: i32, per_col: i32) -> Canvas {
    let width = cols * 2;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32 + (padding * 2) as f32) as i32;
    let mut canvas = Canvas::new(width, height, 0);
    let unit = |y: i32| crand() as f32 / i32::MAX as f32 / per_col as f32 * y as f32;
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0.0f32;
            if y > 1 {
                let (mut r1, mut r2, mut r3) = (unit(y), unit(y), unit(y));
                if crand() % 2 != 0 {
                    r1 = -r1;
                }
                if crand() % 2 != 0 {
                    r2 = -r2;
                }
                if crand() % 2 != 0 {
                    r3 = -r3;
                }
                angle = r1;
                sx = (sx as f32 + r2 * side / 3.0) as i32;
                sy = (sy as f32 + r3 * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle, 1);
        }
    }
    canvas
}

/// 2x4 pixels per braille character (U+2800 + the dot bits).
fn render_braille(c: &Canvas) -> String {
    let mut s = String::new();
    for y in (0..c.height).step_by(4) {
        for x in (0..c.width).step_by(2) {
            let dots = [
                (x, y),
                (x, y + 1),
                (x, y + 2),
                (x + 1, y),
                (x + 1, y + 1),
                (x + 1, y + 2),
                (x, y + 3),
                (x + 1, y + 3),
            ];
            let byte = dots
                .iter()
                .enumerate()
                .filter(|(_, &(px, py))| c.get(px, py) != 0)
                .fold(0u32, |b, (i, _)| b | (1 << i));
            s.push(char::from_u32(0x2800 + byte).unwrap_or(' '));
        }
        if y != c.height - 1 {
            s.push('\n');
        }
    }
    s
}

/// One coloured space per pixel (foreground and background set, as Redis).
fn render_colors(c: &Canvas) -> String {
    let mut s = String::new();
    for y in 0..c.height {
        for x in 0..c.width {
            let ce = match c.get(x, y) {
                1 => "0;90;100m",
                2 => "0;37;47m",
                3 => "0;97;107m",
                _ => "0;30;40m",
            };
            s.push_str("\x1b[");
            s.push_str(ce);
            s.push_str(" \x1b[0m");
        }
        if y != c.height - 1 {
            s.push('\n');
        }
    }
    s
}

struct Skyscraper {
    xoff: i32,
    width: i32,
    height: i32,
    windows: bool,
    color: u8,
}

fn skyscraper(c: &mut Canvas, si: &Skyscraper) {
    let starty = c.height - 1;
    let endy = starty - si.height + 1;
    let mut y = starty;
    while y >= endy {
        for x in si.xoff..si.xoff + si.width {
            // The roof is four pixels narrower.
            if y == endy && (x <= si.xoff + 1 || x >= si.xoff + si.width - 2) {
                continue;
            }
            let mut color = si.color;
            if si.windows
                && x > si.xoff + 1
                && x < si.xoff + si.width - 2
                && y > endy + 1
                && y < starty - 1
            {
                let relx = x - (si.xoff + 1);
                let rely = y - (endy + 1);
                // Windows two pixels wide, one tall.
                if (relx / 2) % 2 != 0 && rely % 2 != 0 {
                    loop {
                        color = 1 + (crand() % 2) as u8;
                        if color != si.color {
                            break;
                        }
                    }
                    if relx % 2 != 0 {
                        color = c.get(x - 1, y);
                    }
                }
            }
            c.set(x, y, color);
        }
        y -= 1;
    }
}

/// Two rows of grey buildings behind, black ones with lit windows in front.
fn skyline(c: &mut Canvas) {
    let h = c.height;
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < c.width {
            offset += crand() % 8;
            let width = 10 + crand() % 9;
            let height = if color == 2 {
                h / 2 + (crand() % h) / 2
            } else {
                h / 2 + (crand() % h) / 3
            };
            let si = Skyscraper {
                xoff: offset,
                width,
                height,
                windows: false,
                color,
            };
            skyscraper(c, &si);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10;
    while offset < c.width {
        offset += crand() % 8;
        let mut width = 5 + crand() % 14;
        if width % 4 != 0 {
            width += width % 3;
        }
        let si = Skyscraper {
            xoff: offset,
            width,
            height: h / 3 + (crand() % h) / 2,
            windows: true,
            color: 0,
        };
        skyscraper(c, &si);
        offset += width + 5;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_pick_pieces_as_redis() {
        assert!(matches!(piece_for("5.0.0"), Piece::Schotter));
        assert!(matches!(piece_for("4.9.0"), Piece::Schotter));
        assert!(matches!(piece_for("6.0.0"), Piece::Skyline));
        assert!(matches!(piece_for("5.9.0"), Piece::Skyline));
        assert!(matches!(piece_for("7.0.15"), Piece::VersionOnly));
        assert!(matches!(piece_for("59.0.0"), Piece::VersionOnly));
        assert!(matches!(piece_for(""), Piece::VersionOnly));
    }
}
