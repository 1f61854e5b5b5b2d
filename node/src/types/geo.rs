//! Geohash math for the GEO commands: the 52-bit interleaved score Redis stores in a sorted
//! set, its decoding back to a cell centre, the haversine distance, and the grid of up to nine
//! cells a radius/box search scans. Every step mirrors Redis 7.0's arithmetic (same operation
//! order, same clamping) so scores, coordinates and distances agree with redis-server bit for
//! bit; no crate does this the Redis way, hence hand-rolled.

/// Longitude limits.
pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;
/// Latitude limits of the Web Mercator projection Redis indexes in.
pub const LAT_MIN: f64 = -85.05112878;
pub const LAT_MAX: f64 = 85.05112878;
/// Bits per coordinate in a stored score (26 + 26 = 52).
pub const STEP_MAX: u8 = 26;
/// Earth radius Redis uses for distances, in meters.
pub const EARTH_RADIUS_M: f64 = 6372797.560856;
/// Half the Mercator world width in meters (used to pick a search precision).
const MERCATOR_MAX: f64 = 20037726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

#[inline]
fn deg_rad(a: f64) -> f64 {
    a * D_R
}
#[inline]
fn rad_deg(a: f64) -> f64 {
    a / D_R
}

/// A geohash cell: `step` bits per coordinate, latitude in the even bits, longitude in the
/// odd ones. `step == 0 && bits == 0` marks an excluded neighbour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Hash {
    pub bits: u64,
    pub step: u8,
}

impl Hash {
    fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The cell's bits left-aligned to 52 bits (the score range it covers starts here).
    pub fn align52(&self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }
}

/// Spreads the 32 bits of `v` to the even bit positions of a u64.
fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    (x | (x << 1)) & 0x5555_5555_5555_5555
}

/// Gathers the even bits of `x` into a u32.
fn squash(x: u64) -> u32 {
    let mut x = x & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    x as u32
}

/// True when `lon,lat` may be indexed (GEOADD and FROMLONLAT accept exactly these).
pub fn valid_lonlat(lon: f64, lat: f64) -> bool {
    (LONG_MIN..=LONG_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat)
}

/// Encodes a point at `step` bits per coordinate within the given ranges; None outside.
fn encode_in(lon_r: (f64, f64), lat_r: (f64, f64), lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if !valid_lonlat(lon, lat) || lat < lat_r.0 || lat > lat_r.1 || lon < lon_r.0 || lon > lon_r.1 {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_r.0) / (lat_r.1 - lat_r.0) * scale;
    let lon_off = (lon - lon_r.0) / (lon_r.1 - lon_r.0) * scale;
    // Truncating casts as C's double -> uint32_t; lat == LAT_MAX gives 1 << step, which
    // Redis keeps (its score then has bit 52 set), so we do too.
    let bits = spread(lat_off as u32) | (spread(lon_off as u32) << 1);
    Some(Hash { bits, step })
}

/// Encodes a point in the Mercator ranges Redis stores.
pub fn encode(lon: f64, lat: f64, step: u8) -> Option<Hash> {
    encode_in((LONG_MIN, LONG_MAX), (LAT_MIN, LAT_MAX), lon, lat, step)
}

/// The 52-bit score GEOADD stores for a valid point.
pub fn score_of(lon: f64, lat: f64) -> Option<u64> {
    encode(lon, lat, STEP_MAX).map(|h| h.align52())
}

/// A cell's bounds: (lon_min, lon_max, lat_min, lat_max).
#[derive(Clone, Copy, Debug)]
struct Area {
    lon: (f64, f64),
    lat: (f64, f64),
}

fn decode_in(lon_r: (f64, f64), lat_r: (f64, f64), h: Hash) -> Area {
    let lat_i = squash(h.bits);
    let lon_i = squash(h.bits >> 1);
    let div = (1u64 << h.step) as f64;
    let lat_scale = lat_r.1 - lat_r.0;
    let lon_scale = lon_r.1 - lon_r.0;
    Area {
        lat: (
            lat_r.0 + (f64::from(lat_i) / div) * lat_scale,
            lat_r.0 + (f64::from(lat_i.wrapping_add(1)) / div) * lat_scale,
        ),
        lon: (
            lon_r.0 + (f64::from(lon_i) / div) * lon_scale,
            lon_r.0 + (f64::from(lon_i.wrapping_add(1)) / div) * lon_scale,
        ),
    }
}

fn decode(h: Hash) -> Area {
    decode_in((LONG_MIN, LONG_MAX), (LAT_MIN, LAT_MAX), h)
}

/// C's `(uint64_t)double` as x86-64 compilers emit it, for scores ZADD put in a geo key
/// (negative, huge, infinite): below 2^63 a signed conversion (negatives wrap, out of range
/// gives 2^63), above it the conversion of `d - 2^63` with the top bit flipped.
fn c_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    fn cvtt(d: f64) -> u64 {
        if d.is_nan() || !(-TWO63..TWO63).contains(&d) {
            1 << 63
        } else {
            d as i64 as u64
        }
    }
    if d < TWO63 || d.is_nan() {
        cvtt(d)
    } else {
        cvtt(d - TWO63) ^ (1 << 63)
    }
}

/// The (lon, lat) centre of the cell a stored score names, clamped to the valid ranges.
pub fn decode_score(score: f64) -> (f64, f64) {
    let a = decode(Hash {
        bits: c_to_u64(score),
        step: STEP_MAX,
    });
    let lon = ((a.lon.0 + a.lon.1) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((a.lat.0 + a.lat.1) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// The 11-character standard geohash (latitude range +-90) GEOHASH replies.
pub fn geohash_string(score: f64) -> Option<String> {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode_score(score);
    let h = encode_in((-180.0, 180.0), (-90.0, 90.0), lon, lat, STEP_MAX)?;
    // 52 bits give ten characters; the eleventh is always '0', as in Redis.
    let s = (0..11)
        .map(|i| {
            let idx = if i == 10 {
                0
            } else {
                (h.bits >> (52 - (i + 1) * 5)) & 0x1f
            };
            ALPHABET[idx as usize] as char
        })
        .collect();
    Some(s)
}

/// Distance between two points along a meridian, in meters.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_M * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// Haversine distance in meters between (lon1, lat1) and (lon2, lat2).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let lon1r = deg_rad(lon1);
    let lon2r = deg_rad(lon2);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let lat1r = deg_rad(lat1);
    let lat2r = deg_rad(lat2);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_M * a.sqrt().asin()
}

/// What a search covers, in meters, around `center` (lon, lat).
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    Radius(f64),
    Box { width: f64, height: f64 },
}

/// The distance from `center` to `p` when `p` is inside the shape.
pub fn within(shape: Shape, center: (f64, f64), p: (f64, f64)) -> Option<f64> {
    match shape {
        Shape::Radius(r) => {
            let d = distance(center.0, center.1, p.0, p.1);
            (d <= r).then_some(d)
        }
        Shape::Box { width, height } => {
            if lat_distance(p.1, center.1) > height / 2.0 {
                return None;
            }
            if distance(p.0, p.1, center.0, p.1) > width / 2.0 {
                return None;
            }
            Some(distance(center.0, center.1, p.0, p.1))
        }
    }
}

/// Precision (bits per coordinate) whose cells are about as large as the search radius.
fn steps_for_radius(mut range: f64, lat: f64) -> u8 {
    if range == 0.0 {
        return STEP_MAX;
    }
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, i32::from(STEP_MAX)) as u8
}

/// Moves a cell one step east (+1) or west (-1), wrapping around.
fn move_x(h: Hash, d: i8) -> Hash {
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0x5555_5555_5555_5555u64 >> (64 - u32::from(h.step) * 2);
    let x = if d > 0 {
        x.wrapping_add(zz + 1)
    } else {
        (x | zz).wrapping_sub(zz + 1)
    };
    let x = x & (0xaaaa_aaaa_aaaa_aaaau64 >> (64 - u32::from(h.step) * 2));
    Hash {
        bits: x | y,
        step: h.step,
    }
}

/// Moves a cell one step north (+1) or south (-1), wrapping around.
fn move_y(h: Hash, d: i8) -> Hash {
    let x = h.bits & 0xaaaa_aaaa_aaaa_aaaa;
    let y = h.bits & 0x5555_5555_5555_5555;
    let zz = 0xaaaa_aaaa_aaaa_aaaau64 >> (64 - u32::from(h.step) * 2);
    let y = if d > 0 {
        y.wrapping_add(zz + 1)
    } else {
        (y | zz).wrapping_sub(zz + 1)
    };
    let y = y & (0x5555_5555_5555_5555u64 >> (64 - u32::from(h.step) * 2));
    Hash {
        bits: x | y,
        step: h.step,
    }
}

/// The cells a search scans, in Redis's order: centre, N, S, E, W, NE, NW, SE, SW (excluded
/// ones removed, a cell equal to the previously scanned one skipped), each as a half-open score
/// range `[min, max)`.
pub fn search_ranges(shape: Shape, center: (f64, f64)) -> Vec<(u64, u64)> {
    let (lon, lat) = center;
    let (half_h, half_w, radius) = match shape {
        Shape::Radius(r) => (r, r, r),
        Shape::Box { width, height } => (
            height / 2.0,
            width / 2.0,
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt(),
        ),
    };
    let lat_delta = rad_deg(half_h / EARTH_RADIUS_M);
    let lon_delta_top = rad_deg(half_w / EARTH_RADIUS_M / deg_rad(lat + lat_delta).cos());
    let lon_delta_bottom = rad_deg(half_w / EARTH_RADIUS_M / deg_rad(lat - lat_delta).cos());
    let south = lat < 0.0;
    let min_lon = if south {
        lon - lon_delta_bottom
    } else {
        lon - lon_delta_top
    };
    let max_lon = if south {
        lon + lon_delta_bottom
    } else {
        lon + lon_delta_top
    };
    let (min_lat, max_lat) = (lat - lat_delta, lat + lat_delta);

    let mut steps = steps_for_radius(radius, lat);
    let Some(mut hash) = encode(lon, lat, steps) else {
        return Vec::new();
    };
    let mut nb = neighbours(hash);
    let mut area = decode(hash);
    let n = decode(nb[1]);
    let s = decode(nb[2]);
    let e = decode(nb[3]);
    let w = decode(nb[4]);
    let decrease = n.lat.1 < max_lat || s.lat.0 > min_lat || e.lon.1 < max_lon || w.lon.0 > min_lon;
    if steps > 1 && decrease {
        steps -= 1;
        let Some(h) = encode(lon, lat, steps) else {
            return Vec::new();
        };
        hash = h;
        nb = neighbours(hash);
        area = decode(hash);
    }
    if steps >= 2 {
        let zero = Hash::default();
        // Indices: 1 N, 2 S, 3 E, 4 W, 5 NE, 6 NW, 7 SE, 8 SW.
        if area.lat.0 < min_lat {
            for i in [2, 8, 7] {
                nb[i] = zero;
            }
        }
        if area.lat.1 > max_lat {
            for i in [1, 5, 6] {
                nb[i] = zero;
            }
        }
        if area.lon.0 < min_lon {
            for i in [4, 8, 6] {
                nb[i] = zero;
            }
        }
        if area.lon.1 > max_lon {
            for i in [3, 7, 5] {
                nb[i] = zero;
            }
        }
    }
    let mut out = Vec::with_capacity(9);
    // Redis compares with the last scanned cell only when that is not the centre (its
    // `last_processed` index starts at 0), so a neighbour equal to the centre is scanned
    // twice there, and here.
    let mut last = 0usize;
    for (i, h) in nb.iter().copied().enumerate() {
        if h.is_zero() || (last != 0 && h == nb[last]) {
            continue;
        }
        let min = h.align52();
        let max = Hash {
            bits: h.bits + 1,
            step: h.step,
        }
        .align52();
        out.push((min, max));
        last = i;
    }
    out
}

/// `[centre, N, S, E, W, NE, NW, SE, SW]`.
fn neighbours(h: Hash) -> [Hash; 9] {
    [
        h,
        move_y(h, 1),
        move_y(h, -1),
        move_x(h, 1),
        move_x(h, -1),
        move_y(move_x(h, 1), 1),
        move_y(move_x(h, -1), 1),
        move_y(move_x(h, 1), -1),
        move_y(move_x(h, -1), -1),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleave_round_trips() {
        for v in [0u32, 1, 0xdead_beef, u32::MAX, 1 << 26] {
            assert_eq!(squash(spread(v)), v);
            assert_eq!(squash(spread(v) << 1 >> 1), v);
        }
    }

    #[test]
    fn palermo_matches_redis() {
        // `GEOADD k 13.361389 38.115556 Palermo` then ZSCORE in redis-server 7.0.
        assert_eq!(score_of(13.361389, 38.115556), Some(3479099956230698));
        let (lon, lat) = decode_score(3479099956230698.0);
        assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
        assert_eq!(
            geohash_string(3479099956230698.0).as_deref(),
            Some("sqc8b49rny0")
        );
    }

    #[test]
    fn out_of_range_is_rejected() {
        assert!(score_of(180.1, 0.0).is_none());
        assert!(score_of(0.0, 85.06).is_none());
        assert!(score_of(f64::NAN, 0.0).is_none());
        assert!(score_of(-180.0, -85.05112878).is_some());
    }
}
