//! OpenSSL's legacy PEM encryption of a private key, opened with tls-key-file-pass (or
//! tls-client-key-file-pass) as redis-server's OpenSSL does: a `-----BEGIN RSA PRIVATE
//! KEY-----` or `-----BEGIN EC PRIVATE KEY-----` block (what `openssl genrsa -aes256
//! -traditional`, `openssl rsa -aes256 -traditional` and `openssl ec -aes256` write) whose
//! headers are
//!
//! ```text
//! Proc-Type: 4,ENCRYPTED
//! DEK-Info: AES-256-CBC,<IV in hex>
//! ```
//!
//! followed by the base64 of the encrypted DER. The cipher key is EVP_BytesToKey(MD5, one
//! iteration, salt = the IV's first 8 bytes, the pass phrase); the cipher runs in CBC mode
//! with PKCS#7 padding. AES-128/192/256-CBC and DES-EDE3-CBC are read. The plaintext is
//! the PKCS#1 (RSA) or SEC1 (EC) key rustls takes.
//!
//! Everything here comes from a file: sizes are bounded and every malformation is an
//! error, never a panic.

use aes::cipher::block_padding::Pkcs7;
use aes::cipher::{BlockDecryptMut, KeyIvInit};
use base64ct::{Base64, Encoding};
use md5::{Digest, Md5};
use rustls::pki_types::PrivateKeyDer;

/// The longest base64 body read (48 KiB of DER: an RSA key of 16384 bits is ~9 KiB).
const MAX_BODY: usize = 64 * 1024;

/// The salt is the IV's first 8 bytes (OpenSSL's PKCS5_SALT_LEN).
const SALT_LEN: usize = 8;

/// The ciphers of DEK-Info that are read, by their OpenSSL names.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Cipher {
    Aes128,
    Aes192,
    Aes256,
    DesEde3,
}

impl Cipher {
    fn from_name(name: &str) -> Option<Cipher> {
        // OpenSSL looks cipher names up case-insensitively.
        [
            ("AES-128-CBC", Cipher::Aes128),
            ("AES-192-CBC", Cipher::Aes192),
            ("AES-256-CBC", Cipher::Aes256),
            ("DES-EDE3-CBC", Cipher::DesEde3),
        ]
        .into_iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, c)| c)
    }

    fn key_len(self) -> usize {
        match self {
            Cipher::Aes128 => 16,
            Cipher::Aes192 => 24,
            Cipher::Aes256 => 32,
            Cipher::DesEde3 => 24,
        }
    }

    /// The IV (and block) length.
    fn iv_len(self) -> usize {
        match self {
            Cipher::DesEde3 => 8,
            _ => 16,
        }
    }

    /// Decrypts `buf` in place and strips its PKCS#7 padding; `None` when the padding is
    /// wrong (a wrong pass phrase, mostly). `key` and `iv` have this cipher's lengths.
    fn decrypt<'b>(self, key: &[u8], iv: &[u8], buf: &'b mut [u8]) -> Option<&'b [u8]> {
        fn run<'b, C>(key: &[u8], iv: &[u8], buf: &'b mut [u8]) -> Option<&'b [u8]>
        where
            C: KeyIvInit + BlockDecryptMut,
        {
            C::new_from_slices(key, iv)
                .ok()?
                .decrypt_padded_mut::<Pkcs7>(buf)
                .ok()
        }
        match self {
            Cipher::Aes128 => run::<cbc::Decryptor<aes::Aes128>>(key, iv, buf),
            Cipher::Aes192 => run::<cbc::Decryptor<aes::Aes192>>(key, iv, buf),
            Cipher::Aes256 => run::<cbc::Decryptor<aes::Aes256>>(key, iv, buf),
            Cipher::DesEde3 => run::<cbc::Decryptor<des::TdesEde3>>(key, iv, buf),
        }
    }
}

/// OpenSSL's EVP_BytesToKey with MD5 and one iteration, the key part only:
/// D_1 = MD5(pass || salt), D_i = MD5(D_{i-1} || pass || salt), key = D_1 || D_2 || ...
/// cut to `len`. Written here (a few lines over md-5) because no RustCrypto crate exposes
/// it; the crates that do (evpkdf, evp_bytestokey) are small single-author ones.
fn evp_bytes_to_key(pass: &[u8], salt: &[u8], len: usize) -> Vec<u8> {
    let mut key = Vec::with_capacity(len + 16);
    let mut prev: Option<[u8; 16]> = None;
    while key.len() < len {
        let mut h = Md5::new();
        if let Some(p) = prev {
            h.update(p);
        }
        h.update(pass);
        h.update(salt);
        let d: [u8; 16] = h.finalize().into();
        key.extend_from_slice(&d);
        prev = Some(d);
    }
    key.truncate(len);
    key
}

/// `hex` as bytes, or `None` unless it is exactly `len` bytes of hex digits.
fn parse_hex(hex: &str, len: usize) -> Option<Vec<u8>> {
    let b = hex.as_bytes();
    if b.len() != 2 * len {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    b.chunks_exact(2)
        .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
        .collect()
}

/// The file's first private-key PEM block (OpenSSL's PEM_read_bio_PrivateKey skips other
/// blocks, certificates included) when it uses the legacy encryption, decrypted with
/// `pass`. `Ok(None)` when that block is not legacy-encrypted (the caller reads it as a
/// plain key); `Err` with the reason when it is and cannot be opened.
pub fn open(pem: &[u8], pass: &str) -> Result<Option<PrivateKeyDer<'static>>, String> {
    let text = std::str::from_utf8(pem).map_err(|_| "the key file is not PEM text".to_string())?;
    let mut lines = text.lines().map(str::trim_end);
    let label = loop {
        let Some(line) = lines.next() else {
            return Ok(None);
        };
        if let Some(label) = line
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
            .filter(|l| l.ends_with("PRIVATE KEY"))
        {
            break label;
        }
    };
    let mut headers = Vec::new();
    let mut body = String::new();
    let end = format!("-----END {label}-----");
    let mut in_headers = true;
    let mut complete = false;
    for line in lines.by_ref() {
        if line == end {
            complete = true;
            break;
        }
        if in_headers {
            if line.is_empty() {
                in_headers = false;
                continue;
            }
            if line.contains(':') && headers.len() < 16 {
                headers.push(line);
                continue;
            }
            if headers.is_empty() {
                // No header at all: a plain key block.
                return Ok(None);
            }
            return Err("bad PEM headers in the key block".into());
        }
        if body.len() + line.len() > MAX_BODY {
            return Err(format!("the key block is longer than {MAX_BODY} bytes"));
        }
        body.extend(line.chars().filter(|c| !c.is_ascii_whitespace()));
    }
    let proc_type = headers.first().and_then(|h| h.strip_prefix("Proc-Type:"));
    let Some(proc_type) = proc_type else {
        return Ok(None);
    };
    if proc_type.trim() != "4,ENCRYPTED" {
        return Err(format!("unsupported Proc-Type '{}'", proc_type.trim()));
    }
    if !complete {
        return Err(format!("no complete {label} block"));
    }
    let wrap = |der: Vec<u8>| -> Option<PrivateKeyDer<'static>> {
        match label {
            "RSA PRIVATE KEY" => Some(PrivateKeyDer::Pkcs1(der.into())),
            "EC PRIVATE KEY" => Some(PrivateKeyDer::Sec1(der.into())),
            "PRIVATE KEY" => Some(PrivateKeyDer::Pkcs8(der.into())),
            _ => None,
        }
    };
    if wrap(Vec::new()).is_none() {
        return Err(format!(
            "unsupported key type '{label}' (RSA and EC keys are read)"
        ));
    }
    let dek = headers
        .iter()
        .find_map(|h| h.strip_prefix("DEK-Info:"))
        .ok_or_else(|| "Proc-Type: 4,ENCRYPTED without a DEK-Info header".to_string())?;
    let (name, iv_hex) = dek
        .trim()
        .split_once(',')
        .ok_or_else(|| "DEK-Info is not '<cipher>,<IV>'".to_string())?;
    let cipher = Cipher::from_name(name.trim()).ok_or_else(|| {
        format!(
            "unsupported encryption '{}' (AES-128-CBC, AES-192-CBC, AES-256-CBC and \
             DES-EDE3-CBC are read)",
            name.trim()
        )
    })?;
    let iv = parse_hex(iv_hex.trim(), cipher.iv_len()).ok_or_else(|| {
        format!(
            "bad IV in DEK-Info: {} hex digits are expected",
            2 * cipher.iv_len()
        )
    })?;
    let mut data = vec![0u8; body.len() / 4 * 3 + 3];
    let n = Base64::decode(&body, &mut data)
        .map_err(|e| format!("bad base64 in the key block ({e})"))?
        .len();
    data.truncate(n);
    if data.is_empty() || !data.len().is_multiple_of(cipher.iv_len()) {
        return Err("the encrypted key is not a whole number of cipher blocks".into());
    }
    if pass.is_empty() {
        return Err("the key is encrypted and tls-key-file-pass is not set".into());
    }
    let key = evp_bytes_to_key(pass.as_bytes(), &iv[..SALT_LEN], cipher.key_len());
    let bad = || "cannot decrypt it with tls-key-file-pass (bad decrypt)".to_string();
    let plain = cipher.decrypt(&key, &iv, &mut data).ok_or_else(bad)?;
    // A wrong pass phrase passes the padding check once in ~256 tries: the plaintext must
    // also be one whole DER SEQUENCE.
    {
        use pkcs8::der::{asn1::AnyRef, Decode, Tag, Tagged};
        match AnyRef::from_der(plain) {
            Ok(any) if any.tag() == Tag::Sequence => {}
            _ => return Err(bad()),
        }
    }
    Ok(wrap(plain.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Test vectors written by OpenSSL 3.0 (`openssl ec -aes128|-aes192|-aes256|-des3
    // -passout pass:tessera`, `openssl genrsa -traditional -aes128 ... 512`); the
    // plaintexts are `openssl ec|rsa -outform DER` of the same throwaway keys.
    const PASS: &str = "tessera";
    const EC_DER: &str = "30770201010420751219c740c8fa67d8e79f56ba26e755f075daffaa0d1ec94c70e8\
        5f479b26eca00a06082a8648ce3d030107a1440342000470b03532e4af517e14403fc52a0ce41e95b779ae\
        054e6edfb1f195d7ef00f091e497605cb8eac02572d2752f99b7dab8be579c5f8bc708d2bfca0ad06ac19efd";
    const EC_AES128: &str = "-----BEGIN EC PRIVATE KEY-----
Proc-Type: 4,ENCRYPTED
DEK-Info: AES-128-CBC,B2CD1B564050B73F22213B201B13F9E0

MiJ1ux5f6X80GGBKiJ9ZO0wtE9FG1eEy9nxDRnv/WkgYNZ6ZW9psnIAjSOy48Eyy
NR2LRQuJyyCVpt+ZQP7UWRRUjdHx+y8g6/7mQmzSrvFwgXLQ2KsDbdEBU84FEV1V
gsOb1sB92Ik8f8CCt7bUSMvVmzSuVFRbnc5xhv/SaiY=
-----END EC PRIVATE KEY-----
";
    const EC_AES192: &str = "-----BEGIN EC PRIVATE KEY-----
Proc-Type: 4,ENCRYPTED
DEK-Info: AES-192-CBC,564E25BA9FBC0E82B397B445C3002096

9suVgj0i+qr02vs7A7J+TsxRGoSYE5WKhceWTlHaoriq7vI2C3Zjkrna96jPt9Q7
KxV8frT4hk6r0tvbwXSkh2sHgW1e0CLLzmp9DeaUG/kEr7HPEDRry4cwT3BGTk3L
I02WDos2c1niRssfGMxk9d4r41Iyrycjzo4ndDHLydM=
-----END EC PRIVATE KEY-----
";
    const EC_AES256: &str = "-----BEGIN EC PRIVATE KEY-----
Proc-Type: 4,ENCRYPTED
DEK-Info: AES-256-CBC,B7D31C917471D78117D025F2611FE6F6

boSnSH4oZBQORp9d6ohtSWtJRkx9lnW7+xgeNnkK13duRM27C+xprmZuChtkw/O3
iCtjXVpxUBE2/MNmrPzn890zV6K5MtiDUvJk2IHuZfzybq+tYcWu1tEYKrHYJ4Y+
gA/xxMVctbAAp7miLvGNtVHU8fELd6X8C90+3OgYANg=
-----END EC PRIVATE KEY-----
";
    const EC_DES3: &str = "-----BEGIN EC PRIVATE KEY-----
Proc-Type: 4,ENCRYPTED
DEK-Info: DES-EDE3-CBC,8C9ECE5925BF5B19

uvdf3O0OwGggTyvLrTSjEfkOt6Qb2+Yz0MDf2QxaTWGj63hqg7U9SDznbaib4F/2
dzr6D3GVQiZF/dedPV0XPwuBFXS80pV1q9Fcx83uWRxPlcCmK1pEtryQBnFIfRPw
uAa2tb/iMP48hJB3e8d5ihRvw+RTpp9vdu2jE0S2a10=
-----END EC PRIVATE KEY-----
";
    const RSA_AES128: &str = "-----BEGIN RSA PRIVATE KEY-----
Proc-Type: 4,ENCRYPTED
DEK-Info: AES-128-CBC,022D269981ED027568D16974EDCA9320

Zn/+606oiBHPHnn3qv4lUHVoizt7Z7uumVAchV8/UMlgLB9WKNhGRbTWG5TqrD5Y
DxaA0A8mfL8b/GOrltBiZw3AEVxOfSNTEJ4qseGoWpFd735LFvtMwg4g3MvRhaoH
MPx87hG4yphdE0DUigPUU/Jqmp7+DVY6cwHxJ/b0NniaTnyyaEMXK3keUKuskfvV
zxIn0u9ZVCTeE1aGy+HzIIBekqU98qZcAXzjOF21GFG5Q7Fepmo7Kt/pk5JLHmzA
7kiJQpAQ9D1Wb5sTE+zMOvNieaAops0LQLnf6XqcpyaghwmYfO0OogzoZJKy9tuS
Ii2YN8Qty4ayTvxmlN54Rl3Ym/ZJ8GvQPAGaAwR6g0xRu6cSry4xJqCcY6phRoHU
lvL6rft/WBH6WcqVe0Ie8e8SYcAXxVpdCUKaQTdFBUvKt4my7vwP0NBkInYuGFon
-----END RSA PRIVATE KEY-----
";
    const RSA_DER: &str = "3082013c020100024100d0549bef928f00ad60eef4890f96b6280e40a7d0ae3cdc39\
        40a099384c563b9c663f396d6dbb0de3a69fac9dc9afd0301e0a1f4319f76edd3109ebc21069d4c3020301\
        0001024100a1638a51b3c5d88e77f365b8f03c9eecb4eddd934a0797cb3a87af6aefa83610734d978769b7\
        47e0993b2f9910a7c5f343a4efb36b2bbb9517077720c376d631022100e6fca45b967c7d132742e90cb2c3\
        1e7977bd0d3bfa61d10c153fdeefb536cfe5022100e6e3e4951b64ad841eda582f03bd40b2fb17983686f2\
        5f280e434c2ec4f83787022100d3faa71b264fb8b90b1eeca12aacc61ad3383c1cfefb25cde0f26cb5afa8\
        4dc102206b10c65076516b3cd6e9bcf6a02f442f3acc282330d47757a5b5834034ca3d45022100b60350f7\
        9f898eaa78825eaec7a81026a591e2509af464d1ca9f7020f777bf50";

    fn unhex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        parse_hex(&s, s.len() / 2).expect("hex")
    }

    fn err(pem: &str, pass: &str) -> String {
        open(pem.as_bytes(), pass).expect_err("an error")
    }

    /// `openssl enc -<cipher> -P -md md5 -S 0102030405060708 -pass pass:tessera`.
    #[test]
    fn evp_bytes_to_key_matches_openssl_enc() {
        let salt = [1, 2, 3, 4, 5, 6, 7, 8];
        let k = |len| evp_bytes_to_key(PASS.as_bytes(), &salt, len);
        assert_eq!(k(16), unhex("713B1CE9E17DB7585E9E3FA6D9FF4710"));
        assert_eq!(
            k(24),
            unhex("713B1CE9E17DB7585E9E3FA6D9FF471069D4276867C262D1")
        );
        assert_eq!(
            k(32),
            unhex("713B1CE9E17DB7585E9E3FA6D9FF471069D4276867C262D1E78BFD14F17E50D7")
        );
    }

    #[test]
    fn opens_each_cipher_like_openssl() {
        for pem in [EC_AES128, EC_AES192, EC_AES256, EC_DES3] {
            let key = open(pem.as_bytes(), PASS).expect("opens").expect("legacy");
            assert_eq!(key, PrivateKeyDer::Sec1(unhex(EC_DER).into()), "{pem}");
        }
        let key = open(RSA_AES128.as_bytes(), PASS)
            .expect("opens")
            .expect("legacy");
        assert_eq!(key, PrivateKeyDer::Pkcs1(unhex(RSA_DER).into()));
    }

    #[test]
    fn skips_other_blocks_and_plain_keys() {
        let cert = "-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n";
        let key = open(format!("{cert}{EC_AES256}").as_bytes(), PASS)
            .expect("opens")
            .expect("legacy");
        assert_eq!(key, PrivateKeyDer::Sec1(unhex(EC_DER).into()));
        let plain = "-----BEGIN EC PRIVATE KEY-----\nMAA=\n-----END EC PRIVATE KEY-----\n";
        assert_eq!(open(plain.as_bytes(), PASS), Ok(None));
        assert_eq!(open(cert.as_bytes(), PASS), Ok(None));
        assert_eq!(open(b"ENCRYPTED", PASS), Ok(None));
    }

    #[test]
    fn wrong_or_missing_pass_phrase() {
        for pem in [EC_AES128, EC_AES192, EC_AES256, EC_DES3, RSA_AES128] {
            for pass in ["wrong", "tesserA", "tessera ", "x"] {
                assert_eq!(
                    err(pem, pass),
                    "cannot decrypt it with tls-key-file-pass (bad decrypt)"
                );
            }
            assert_eq!(
                err(pem, ""),
                "the key is encrypted and tls-key-file-pass is not set"
            );
        }
    }

    #[test]
    fn hostile_files_are_errors() {
        let with = |from: &str, to: &str| EC_AES256.replacen(from, to, 1);
        let cases = [
            (with("AES-256-CBC", "AES-256-GCM"), "unsupported encryption"),
            (with("AES-256-CBC", "DES-CBC"), "unsupported encryption"),
            (
                with(",B7D31C917471D78117D025F2611FE6F6", ""),
                "DEK-Info is not",
            ),
            (with("B7D31C917471D78117D025F2611FE6F6", "B7D3"), "bad IV"),
            (
                with(
                    "B7D31C917471D78117D025F2611FE6F6",
                    "B7D31C917471D78117D025F2611FE6F600",
                ),
                "bad IV",
            ),
            (
                with(
                    "B7D31C917471D78117D025F2611FE6F6",
                    "Z7D31C917471D78117D025F2611FE6F6",
                ),
                "bad IV",
            ),
            (
                with(
                    "B7D31C917471D78117D025F2611FE6F6",
                    "é7D31C917471D78117D025F2611FE6F",
                ),
                "bad IV",
            ),
            (with("DEK-Info", "DEK-Inf0"), "without a DEK-Info"),
            (with("4,ENCRYPTED", "4,MIC-ONLY"), "unsupported Proc-Type"),
            (with("boSnSH4o", "boSnSH4*"), "bad base64"),
            (
                with("gA/xxMVctbAAp7miLvGNtVHU8fELd6X8C90+3OgYANg=", ""),
                "bad decrypt",
            ),
            (
                EC_AES256
                    .lines()
                    .filter(|l| l.len() != 64 && l.len() != 44)
                    .collect::<Vec<_>>()
                    .join("\n"),
                "whole number",
            ),
            (
                with("gA/xxMVctbAAp7miLvGNtVHU8fELd6X8C90+3OgYANg=", "gA=="),
                "whole number",
            ),
            (with("-----END EC PRIVATE KEY-----", ""), "no complete"),
            (
                with("EC PRIVATE KEY", "DSA PRIVATE KEY").replace("END EC", "END DSA"),
                "unsupported key type",
            ),
            (with("\n\n", "\nnot a header\n\n"), "bad PEM headers"),
        ];
        for (pem, want) in cases {
            let e = err(&pem, PASS);
            assert!(e.contains(want), "{want:?} not in {e:?} for\n{pem}");
        }
        let long = format!(
            "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\
             DEK-Info: AES-256-CBC,B7D31C917471D78117D025F2611FE6F6\n\n{}\n\
             -----END EC PRIVATE KEY-----\n",
            "QUFB\n".repeat(MAX_BODY / 4 + 1)
        );
        assert!(err(&long, PASS).contains("longer than"));
        assert_eq!(
            open(&[0xff, 0xfe], PASS),
            Err("the key file is not PEM text".into())
        );
    }
}
