//! tls-key-file-pass for PKCS#8 keys encrypted with PKCS#12's password-based schemes,
//! pbeWithSHAAnd3-KeyTripleDES-CBC and pbeWithSHAAnd2-KeyTripleDES-CBC: what
//! `openssl pkcs8 -topk8 -v1 PBE-SHA1-3DES` (or `PBE-SHA1-2DES`) writes, and what
//! redis-server opens through OpenSSL 3's default provider. The pkcs8 crate reads PBES2 only.
//!
//! The key and IV come from RFC 7292 appendix B's derivation with SHA-1 (the pkcs12 crate),
//! the data is DES-EDE3 in CBC mode with PKCS#7 padding. PKCS#5 v1.5's PBES1 schemes
//! (single DES or RC2 with MD5 or SHA-1) and PKCS#12's RC2/RC4 ones stay refused: OpenSSL 3
//! needs its legacy provider for them, so redis-server refuses them too.

use cbc::cipher::block_padding::Pkcs7;
use cbc::cipher::{BlockDecryptMut, KeyIvInit};
use pkcs12::kdf::{derive_key_utf8, Pkcs12KeyType};
use pkcs12::pbe_params::{EncryptedPrivateKeyInfo, Pkcs12PbeParams};
use pkcs8::der::Decode;
use rustls::pki_types::PrivateKeyDer;

/// More rounds than anyone writes (OpenSSL: 2048) and few enough to derive in about a second:
/// a key file cannot stall the start or a CONFIG SET for minutes.
const MAX_ROUNDS: i32 = 1 << 22;

/// Opens `der` (an EncryptedPrivateKeyInfo) when it uses one of the two schemes; `Ok(None)`
/// when it uses another, for the PBES2 reader.
pub fn open(der: &[u8], pass: &str) -> Result<Option<PrivateKeyDer<'static>>, String> {
    let Ok(info) = EncryptedPrivateKeyInfo::from_der(der) else {
        return Ok(None);
    };
    let alg = &info.encryption_algorithm;
    let key_len = if alg.oid == pkcs12::PKCS_12_PBE_WITH_SHAAND3_KEY_TRIPLE_DES_CBC {
        24
    } else if alg.oid == pkcs12::PKCS_12_PBE_WITH_SHAAND2_KEY_TRIPLE_DES_CBC {
        16
    } else if legacy_only(&alg.oid) {
        return Err(format!(
            "its encryption ({}) needs OpenSSL's legacy provider, which redis-server does not load either; re-encrypt it with `openssl pkcs8 -topk8 -v2 aes-256-cbc`",
            alg.oid
        ));
    } else {
        return Ok(None);
    };
    if pass.is_empty() {
        return Err("the key is encrypted and tls-key-file-pass is not set".into());
    }
    let params = alg
        .parameters
        .as_ref()
        .ok_or("the PKCS#12 encryption parameters are missing")?
        .decode_as::<Pkcs12PbeParams>()
        .map_err(|e| format!("bad PKCS#12 encryption parameters: {e}"))?;
    if params.iterations < 1 || params.iterations > MAX_ROUNDS {
        return Err(format!(
            "the key's iteration count {} is outside 1..={MAX_ROUNDS}",
            params.iterations
        ));
    }
    let derive = |kind, len| {
        derive_key_utf8::<sha1::Sha1>(pass, params.salt.as_bytes(), kind, params.iterations, len)
            .map_err(|e| format!("tls-key-file-pass cannot be used as a PKCS#12 password: {e}"))
    };
    let key = derive(Pkcs12KeyType::EncryptionKey, key_len)?;
    let iv = derive(Pkcs12KeyType::Iv, 8)?;
    let mut plain = info.encrypted_data.as_bytes().to_vec();
    let len = if key_len == 24 {
        cbc::Decryptor::<des::TdesEde3>::new_from_slices(&key, &iv)
            .map_err(|e| e.to_string())?
            .decrypt_padded_mut::<Pkcs7>(&mut plain)
            .map(|p| p.len())
    } else {
        cbc::Decryptor::<des::TdesEde2>::new_from_slices(&key, &iv)
            .map_err(|e| e.to_string())?
            .decrypt_padded_mut::<Pkcs7>(&mut plain)
            .map(|p| p.len())
    };
    // A wrong password shows as bad padding, or (one time in 256) as padding that happens to
    // be right over bytes that are no key.
    let wrong = || "cannot decrypt it with tls-key-file-pass (wrong pass phrase?)".to_string();
    plain.truncate(len.map_err(|_| wrong())?);
    pkcs8::PrivateKeyInfo::from_der(&plain).map_err(|_| wrong())?;
    Ok(Some(PrivateKeyDer::Pkcs8(plain.into())))
}

/// PKCS#5 v1.5's PBES1 and PKCS#12's RC2/RC4 schemes (see the module doc).
fn legacy_only(oid: &pkcs8::ObjectIdentifier) -> bool {
    let s = oid.to_string();
    // 1.2.840.113549.1.5.{1,3,4,6,10,11}: PBES1; 1.2.840.113549.1.12.1.{1,2,5,6}: RC4 / RC2.
    matches!(
        s.strip_prefix("1.2.840.113549.1.5."),
        Some("1" | "3" | "4" | "6" | "10" | "11")
    ) || matches!(
        s.strip_prefix("1.2.840.113549.1.12.1."),
        Some("1" | "2" | "5" | "6")
    )
}
