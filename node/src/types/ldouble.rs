//! Software x87 `long double` (64-bit mantissa, round-to-nearest-even) just big enough for
//! HINCRBYFLOAT / INCRBYFLOAT: parse like `strtold`, add, and print like `%.17Lf` with
//! Redis's trailing-zero trimming. Redis does this arithmetic in 80-bit long double, so
//! `hincrbyfloat h f 1e3` after 0.3 prints "1000.29999999999999999"; f64 cannot reproduce
//! that. Hand-rolled (with a tiny bignum) because no maintained crate offers an exact
//! 80-bit extended float with correctly rounded decimal conversion.

use std::cmp::Ordering;

/// Little-endian base-2^32 unsigned big integer, normalised (no high zero limbs).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u64(v: u64) -> Big {
        let mut b = Big(vec![v as u32, (v >> 32) as u32]);
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn bits(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(&t) => (self.0.len() as u64 - 1) * 32 + (32 - t.leading_zeros() as u64),
        }
    }

    fn bit(&self, i: u64) -> bool {
        let (l, b) = ((i / 32) as usize, i % 32);
        l < self.0.len() && (self.0[l] >> b) & 1 == 1
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for l in &mut self.0 {
            let v = *l as u64 * m as u64 + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    fn add_small(&mut self, a: u32) {
        let mut carry = a as u64;
        for l in &mut self.0 {
            if carry == 0 {
                return;
            }
            let v = *l as u64 + carry;
            *l = v as u32;
            carry = v >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
    }

    fn shl(&self, n: u64) -> Big {
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        let mut out = vec![0u32; limbs];
        let mut carry = 0u32;
        for &l in &self.0 {
            if bits == 0 {
                out.push(l);
            } else {
                out.push((l << bits) | carry);
                carry = l >> (32 - bits);
            }
        }
        if carry > 0 {
            out.push(carry);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn shr(&self, n: u64) -> Big {
        let (limbs, bits) = ((n / 32) as usize, (n % 32) as u32);
        if limbs >= self.0.len() {
            return Big(Vec::new());
        }
        let src = &self.0[limbs..];
        let mut out = Vec::with_capacity(src.len());
        for i in 0..src.len() {
            let lo = src[i] >> bits;
            let hi = if bits > 0 && i + 1 < src.len() {
                src[i + 1] << (32 - bits)
            } else {
                0
            };
            out.push(lo | hi);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    /// self -= o (requires self >= o).
    fn sub_assign(&mut self, o: &Big) {
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let v = self.0[i] as i64 - o.0.get(i).copied().unwrap_or(0) as i64 - borrow;
            borrow = (v < 0) as i64;
            self.0[i] = v.rem_euclid(1 << 32) as u32;
        }
        self.trim();
    }

    fn add(&self, o: &Big) -> Big {
        let n = self.0.len().max(o.0.len());
        let mut out = Vec::with_capacity(n + 1);
        let mut carry = 0u64;
        for i in 0..n {
            let v = self.0.get(i).copied().unwrap_or(0) as u64
                + o.0.get(i).copied().unwrap_or(0) as u64
                + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        out.push(carry as u32);
        let mut b = Big(out);
        b.trim();
        b
    }

    /// (self / d, self % d) by binary long division.
    fn divmod(&self, d: &Big) -> (Big, Big) {
        let mut q = Big(vec![0; self.0.len()]);
        let mut r = Big(Vec::new());
        for i in (0..self.bits()).rev() {
            r.shl1_in_place(self.bit(i));
            if r.cmp(d) != Ordering::Less {
                r.sub_assign(d);
                q.0[(i / 32) as usize] |= 1 << (i % 32);
            }
        }
        q.trim();
        (q, r)
    }

    /// self = self * 2 + bit, in place (the inner step of `divmod`).
    fn shl1_in_place(&mut self, bit: bool) {
        let mut carry = bit as u32;
        for l in &mut self.0 {
            let next = *l >> 31;
            *l = (*l << 1) | carry;
            carry = next;
        }
        if carry > 0 {
            self.0.push(carry);
        }
    }

    fn divmod_small(&mut self, d: u32) -> u32 {
        let mut rem = 0u64;
        for l in self.0.iter_mut().rev() {
            let v = (rem << 32) | *l as u64;
            *l = (v / d as u64) as u32;
            rem = v % d as u64;
        }
        self.trim();
        rem as u32
    }

    fn pow10(n: u32) -> Big {
        let mut b = Big::from_u64(1);
        for _ in 0..n / 9 {
            b.mul_small(1_000_000_000);
        }
        b.mul_small(10u32.pow(n % 9));
        b
    }

    fn to_dec(&self) -> String {
        if self.is_zero() {
            return "0".into();
        }
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.divmod_small(1_000_000_000));
        }
        let mut s = chunks.pop().map(|c| c.to_string()).unwrap_or_default();
        for c in chunks.iter().rev() {
            s.push_str(&format!("{c:09}"));
        }
        s
    }

    fn low_u64(&self) -> u64 {
        self.0.first().copied().unwrap_or(0) as u64
            | (self.0.get(1).copied().unwrap_or(0) as u64) << 32
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Zero,
    Inf,
    Nan,
    /// mant * 2^exp, mant normalised (bit 63 set).
    Finite {
        mant: u64,
        exp: i32,
    },
}

/// An 80-bit extended-precision float.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LDouble {
    neg: bool,
    kind: Kind,
}

const MAX_EXP: i64 = 16383;
const MIN_EXP: i64 = -16445;
/// Decimal exponents past this are certainly out of range (|x| < 10^-4951 or > 10^4933).
const DEC_LIMIT: i64 = 5200;

/// Rounds `n * 2^exp` (plus a nonzero tail below it when `sticky`) to 64 bits.
fn round(n: &Big, exp: i64, sticky: bool) -> Kind {
    if n.is_zero() {
        return Kind::Zero;
    }
    let bits = n.bits();
    let (mut mant, mut e) = if bits <= 64 {
        (n.low_u64() << (64 - bits), exp - (64 - bits as i64))
    } else {
        let shift = bits - 64;
        let q = n.shr(shift).low_u64();
        let half = n.bit(shift - 1);
        let rest = sticky || (0..shift - 1).any(|i| n.bit(i));
        let up = half && (rest || q & 1 == 1);
        let e = exp + shift as i64;
        match (q.checked_add(up as u64), up) {
            (Some(v), _) => (v, e),
            (None, _) => (1 << 63, e + 1),
        }
    };
    if mant == 0 {
        mant = 1 << 63;
        e += 1;
    }
    if e + 63 > MAX_EXP {
        Kind::Inf
    } else if e + 63 < MIN_EXP {
        Kind::Zero
    } else {
        Kind::Finite {
            mant,
            exp: e as i32,
        }
    }
}

impl LDouble {
    pub fn is_finite(&self) -> bool {
        matches!(self.kind, Kind::Zero | Kind::Finite { .. })
    }

    pub fn is_nan(&self) -> bool {
        self.kind == Kind::Nan
    }

    /// Parses like Redis's `string2ld` (strtold over the whole string, no leading space,
    /// NaN rejected): decimal, `inf`/`infinity`, and hex (`0x1.8p3`) forms.
    pub fn parse(s: &[u8]) -> Option<LDouble> {
        if s.is_empty() || s.len() >= 5 * 1024 || s[0].is_ascii_whitespace() {
            return None;
        }
        let (neg, body) = match s[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let lower = body.to_ascii_lowercase();
        if lower == b"inf" || lower == b"infinity" {
            return Some(LDouble {
                neg,
                kind: Kind::Inf,
            });
        }
        let (kind, mant, exp_char) = match lower.strip_prefix(b"0x") {
            Some(h) => (parse_hex(h)?, h, b'p'),
            None => (parse_dec(&lower)?, &lower[..], b'e'),
        };
        // strtold sets ERANGE on overflow (HUGE_VALL) and on underflow to zero: string2ld
        // rejects both, so `1e5000` and `1e-5000` are "not a valid float".
        let nonzero = mant
            .iter()
            .take_while(|&&c| c != exp_char)
            .any(|&c| c.is_ascii_hexdigit() && c != b'0');
        match kind {
            Kind::Inf => None,
            Kind::Zero if nonzero => None,
            kind => Some(LDouble { neg, kind }),
        }
    }

    /// The exact sum, rounded to nearest-even.
    fn sum(self, o: LDouble) -> LDouble {
        use Kind::*;
        match (self.kind, o.kind) {
            (Nan, _) | (_, Nan) => LDouble {
                neg: false,
                kind: Nan,
            },
            (Inf, Inf) if self.neg != o.neg => LDouble {
                neg: false,
                kind: Nan,
            },
            (Inf, _) => self,
            (_, Inf) => o,
            (Zero, Zero) => LDouble {
                neg: self.neg && o.neg,
                kind: Zero,
            },
            (Zero, _) => o,
            (_, Zero) => self,
            (Finite { mant: ma, exp: ea }, Finite { mant: mb, exp: eb }) => {
                let (big, small, eb_, es) = if ea >= eb {
                    ((self.neg, ma), (o.neg, mb), ea, eb)
                } else {
                    ((o.neg, mb), (self.neg, ma), eb, ea)
                };
                let d = (eb_ as i64 - es as i64) as u64;
                if d > 200 {
                    return LDouble {
                        neg: big.0,
                        kind: Finite {
                            mant: big.1,
                            exp: eb_,
                        },
                    };
                }
                let a = Big::from_u64(big.1).shl(d);
                let b = Big::from_u64(small.1);
                let (neg, sum) = if big.0 == small.0 {
                    (big.0, a.add(&b))
                } else {
                    match a.cmp(&b) {
                        Ordering::Equal => {
                            return LDouble {
                                neg: false,
                                kind: Zero,
                            }
                        }
                        Ordering::Greater => {
                            let mut a = a;
                            a.sub_assign(&b);
                            (big.0, a)
                        }
                        Ordering::Less => {
                            let mut b = b;
                            b.sub_assign(&a);
                            (small.0, b)
                        }
                    }
                };
                LDouble {
                    neg,
                    kind: round(&sum, es as i64, false),
                }
            }
        }
    }

    /// `printf("%.17Lf")` followed by Redis's trimming of trailing zeros (and "-0" → "0").
    pub fn to_human(&self) -> String {
        let body = match self.kind {
            Kind::Nan => return "nan".into(),
            Kind::Inf => {
                return if self.neg {
                    "-inf".into()
                } else {
                    "inf".into()
                }
            }
            Kind::Zero => Big(Vec::new()),
            Kind::Finite { mant, exp } => {
                let mut n = Big::from_u64(mant);
                let p = Big::pow10(17);
                n = mul_big(&n, &p);
                if exp >= 0 {
                    n.shl(exp as u64)
                } else {
                    let sh = (-exp) as u64;
                    let q = n.shr(sh);
                    let half = sh > 0 && n.bit(sh - 1);
                    let rest = (0..sh.saturating_sub(1)).any(|i| n.bit(i));
                    let mut q = q;
                    if half && (rest || q.bit(0)) {
                        q.add_small(1);
                    }
                    q
                }
            }
        };
        let mut digits = body.to_dec();
        while digits.len() < 18 {
            digits.insert(0, '0');
        }
        let (int, frac) = digits.split_at(digits.len() - 17);
        let frac = frac.trim_end_matches('0');
        let mut s = String::new();
        if self.neg {
            s.push('-');
        }
        s.push_str(int);
        if !frac.is_empty() {
            s.push('.');
            s.push_str(frac);
        }
        if s == "-0" {
            s = "0".into();
        }
        s
    }
}

impl std::ops::Add for LDouble {
    type Output = LDouble;
    fn add(self, o: LDouble) -> LDouble {
        self.sum(o)
    }
}

fn mul_big(a: &Big, b: &Big) -> Big {
    let mut out = vec![0u64; a.0.len() + b.0.len() + 1];
    for (i, &x) in a.0.iter().enumerate() {
        let mut carry = 0u64;
        for (j, &y) in b.0.iter().enumerate() {
            let v = out[i + j] + x as u64 * y as u64 + carry;
            out[i + j] = v & 0xffff_ffff;
            carry = v >> 32;
        }
        out[i + b.0.len()] += carry;
    }
    let mut r = Big(out.into_iter().map(|v| v as u32).collect());
    r.trim();
    r
}

/// `digits[.digits][e[+-]digits]` (at least one digit in the mantissa).
fn parse_dec(s: &[u8]) -> Option<Kind> {
    let mut i = 0;
    let mut n = Big(Vec::new());
    let (mut ndig, mut frac, mut seen_dot) = (0usize, 0i64, false);
    let mut sticky = false;
    while i < s.len() {
        match s[i] {
            b'0'..=b'9' => {
                ndig += 1;
                // Past ~800 significant digits only "is anything nonzero" matters.
                if n.bits() < 2800 {
                    n.mul_small(10);
                    n.add_small((s[i] - b'0') as u32);
                    if seen_dot {
                        frac += 1;
                    }
                } else {
                    sticky |= s[i] != b'0';
                    if !seen_dot {
                        frac -= 1;
                    }
                }
            }
            b'.' if !seen_dot => seen_dot = true,
            _ => break,
        }
        i += 1;
    }
    if ndig == 0 {
        return None;
    }
    let mut exp10: i64 = 0;
    if i < s.len() && s[i] == b'e' {
        let mut j = i + 1;
        let eneg = match s.get(j) {
            Some(b'-') => {
                j += 1;
                true
            }
            Some(b'+') => {
                j += 1;
                false
            }
            _ => false,
        };
        let start = j;
        while j < s.len() && s[j].is_ascii_digit() {
            exp10 = (exp10 * 10 + (s[j] - b'0') as i64).min(1 << 40);
            j += 1;
        }
        if j == start {
            return None;
        }
        if eneg {
            exp10 = -exp10;
        }
        i = j;
    }
    if i != s.len() {
        return None;
    }
    if n.is_zero() {
        return Some(Kind::Zero);
    }
    let adj = exp10 - frac;
    if adj > DEC_LIMIT {
        return Some(Kind::Inf);
    }
    // |x| < 10^(adj + digits) < 2^-16446 rounds to zero.
    let digits = (n.bits() as i64 * 30103) / 100_000 + 1;
    if adj + digits < -4960 {
        return Some(Kind::Zero);
    }
    if adj >= 0 {
        let v = mul_big(&n, &Big::pow10(adj as u32));
        return Some(round(&v, 0, sticky));
    }
    let p = Big::pow10((-adj) as u32);
    let s_ = (66 + p.bits() as i64 - n.bits() as i64 + 1).max(0) as u64;
    let (q, r) = n.shl(s_).divmod(&p);
    Some(round(&q, -(s_ as i64), sticky || !r.is_zero()))
}

/// Hex float body after "0x": `hex[.hex][p[+-]dec]`.
fn parse_hex(s: &[u8]) -> Option<Kind> {
    let mut i = 0;
    let mut n = Big(Vec::new());
    let (mut ndig, mut frac, mut seen_dot) = (0usize, 0i64, false);
    while i < s.len() {
        let c = s[i];
        if let Some(d) = (c as char).to_digit(16) {
            ndig += 1;
            if n.bits() < 4000 {
                n.mul_small(16);
                n.add_small(d);
                if seen_dot {
                    frac += 4;
                }
            } else if !seen_dot {
                frac -= 4;
            }
        } else if c == b'.' && !seen_dot {
            seen_dot = true;
        } else {
            break;
        }
        i += 1;
    }
    if ndig == 0 {
        return None;
    }
    let mut exp2: i64 = 0;
    if i < s.len() && s[i] == b'p' {
        let rest = std::str::from_utf8(&s[i + 1..]).ok()?;
        exp2 = rest.parse::<i64>().ok()?.clamp(-(1 << 40), 1 << 40);
        i = s.len();
    }
    if i != s.len() {
        return None;
    }
    Some(round(&n, exp2 - frac, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(cur: &str, by: &str) -> String {
        let a = LDouble::parse(cur.as_bytes()).unwrap();
        let b = LDouble::parse(by.as_bytes()).unwrap();
        (a + b).to_human()
    }

    #[test]
    fn matches_redis_long_double_results() {
        // Expected values were produced by redis-server 7.0 (x86-64) HINCRBYFLOAT.
        assert_eq!(incr("0", "0.1"), "0.1");
        assert_eq!(incr("0.1", "0.2"), "0.3");
        assert_eq!(incr("0.3", "1e3"), "1000.29999999999999999");
        assert_eq!(incr("1000.29999999999999999", "-1000.3"), "0");
        assert_eq!(incr("0", "1e30"), "1000000000000000000024696061952");
        assert_eq!(
            incr("1000000000000000000024696061952", "1.5e-10"),
            "1000000000000000000024696061952"
        );
        assert_eq!(incr("0", "3.0e-20"), "0");
        assert_eq!(
            incr("0", "123456789012345678901234567890"),
            "123456789012345678899921813504"
        );
        assert_eq!(incr("0", "-0.0"), "0");
        assert_eq!(incr("0", "0x10"), "16");
        assert_eq!(incr("0", "1."), "1");
        assert_eq!(incr("0", ".5"), "0.5");
        assert_eq!(incr("0", "1e-400"), "0");
        assert_eq!(
            incr("0", "9.999999999999999999e5"),
            "999999.99999999999988631"
        );
        assert_eq!(incr("10.5", "0.1"), "10.6");
        assert_eq!(incr("5", "-7.25"), "-2.25");
    }

    #[test]
    fn extreme_exponents_are_bounded() {
        assert_eq!(incr("0", "1e-4950"), "0");
        // strtold's ERANGE to zero / to HUGE_VALL: Redis says "not a valid float".
        assert!(LDouble::parse(b"1e-9000").is_none());
        assert!(LDouble::parse(b"1e4933").is_none());
        let t = std::time::Instant::now();
        for _ in 0..3 {
            LDouble::parse(b"123456789e-4940").unwrap();
        }
        eprintln!("3 parses of a tiny value: {:?}", t.elapsed());
    }

    #[test]
    fn rejects_and_specials() {
        for bad in ["", " 1", "1 ", "abc", "1e", "--1", "0x", "1.2.3"] {
            assert!(LDouble::parse(bad.as_bytes()).is_none(), "{bad}");
        }
        assert!(LDouble::parse(b"nan").is_none());
        assert!(!LDouble::parse(b"inf").unwrap().is_finite());
        assert!(LDouble::parse(b"1e5000").is_none());
        assert!(LDouble::parse(b"-0x1p40000").is_none());
        assert_eq!(LDouble::parse(b"0e-9000"), LDouble::parse(b"0"));
        let inf = LDouble::parse(b"inf").unwrap();
        let minf = LDouble::parse(b"-inf").unwrap();
        assert!((inf + minf).is_nan());
    }
}
