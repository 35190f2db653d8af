//! HS256 JSON Web Tokens as Slurm's `auth/jwt` uses them: claims `sun`
//! (the Slurm user name), `iat` and `exp`, signed with the key named by
//! `AuthAltParameters=jwt_key=/path` in `slurm.conf`.
//!
//! No HTTP here, so the commands (`scontrol token`) can mint tokens with it.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::path::{Path, PathBuf};

/// Default token lifetime of `scontrol token` (seconds).
pub const DEFAULT_LIFESPAN: i64 = 1800;
/// Clock skew tolerated on `iat`, seconds.
const SKEW: i64 = 60;

#[derive(Debug, thiserror::Error)]
pub enum JwtError {
    #[error("cannot read jwt key {path}: {source}")]
    Key {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("jwt key {0} is too short (need at least 16 bytes)")]
    ShortKey(PathBuf),
    #[error("AuthAltParameters has no jwt_key=")]
    NoKey,
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    #[error("token algorithm {0} is not accepted (only HS256)")]
    Algorithm(String),
    #[error("token signature does not match")]
    Signature,
    #[error("token expired")]
    Expired,
    #[error("token issued in the future")]
    NotYetValid,
    #[error("token lifespan must be positive")]
    Lifespan,
}

/// What a verified token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// Slurm user name.
    pub sun: String,
    pub iat: Option<i64>,
    pub exp: i64,
}

fn sign(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length.
    let mut m = match <Hmac<Sha256> as Mac>::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => return Vec::new(),
    };
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

/// A token for `user`, valid `lifespan_secs` from `now`.
pub fn mint_token_at(
    key: &[u8],
    user: &str,
    now: i64,
    lifespan_secs: i64,
) -> Result<String, JwtError> {
    if lifespan_secs <= 0 {
        return Err(JwtError::Lifespan);
    }
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let claims = serde_json::json!({
        "exp": now.saturating_add(lifespan_secs),
        "iat": now,
        "sun": user,
    });
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string().as_bytes());
    let signing_input = format!("{header}.{payload}");
    let sig = URL_SAFE_NO_PAD.encode(sign(key, signing_input.as_bytes()));
    Ok(format!("{signing_input}.{sig}"))
}

/// A token for `user`, valid `lifespan_secs` from now (what `scontrol
/// token` prints after `SLURM_JWT=`).
pub fn mint_token(key: &[u8], user: &str, lifespan_secs: i64) -> Result<String, JwtError> {
    mint_token_at(key, user, crate::auth::now(), lifespan_secs)
}

/// The user a token names, read without checking it: for a gateway that
/// holds no key and passes the token on to daemons that check it.
pub fn unverified_user(token: &str) -> Result<String, JwtError> {
    let p = token
        .trim()
        .split('.')
        .nth(1)
        .ok_or(JwtError::Malformed("expected three dot-separated parts"))?;
    let claims: serde_json::Value = URL_SAFE_NO_PAD
        .decode(p.trim_end_matches('='))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or(JwtError::Malformed("payload is not base64url JSON"))?;
    claims
        .get("sun")
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or(JwtError::Malformed("no sun (user name) claim"))
}

/// Check `token`'s algorithm, signature and validity window at `now`.
pub fn verify_token(key: &[u8], token: &str, now: i64) -> Result<Claims, JwtError> {
    let token = token.trim();
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwtError::Malformed("expected three dot-separated parts"));
    };
    let header: serde_json::Value = URL_SAFE_NO_PAD
        .decode(h.trim_end_matches('='))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or(JwtError::Malformed("header is not base64url JSON"))?;
    match header.get("alg").and_then(|a| a.as_str()) {
        Some("HS256") => {}
        Some(other) => return Err(JwtError::Algorithm(other.to_string())),
        None => return Err(JwtError::Malformed("header has no alg")),
    }
    let sig = URL_SAFE_NO_PAD
        .decode(s.trim_end_matches('='))
        .map_err(|_| JwtError::Malformed("signature is not base64url"))?;
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).map_err(|_| JwtError::Signature)?;
    m.update(h.as_bytes());
    m.update(b".");
    m.update(p.as_bytes());
    m.verify_slice(&sig).map_err(|_| JwtError::Signature)?;
    let claims: serde_json::Value = URL_SAFE_NO_PAD
        .decode(p.trim_end_matches('='))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or(JwtError::Malformed("payload is not base64url JSON"))?;
    let sun = claims
        .get("sun")
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty())
        .ok_or(JwtError::Malformed("no sun (user name) claim"))?
        .to_string();
    let exp = claims
        .get("exp")
        .and_then(int_claim)
        .ok_or(JwtError::Malformed("no exp claim"))?;
    let iat = claims.get("iat").and_then(int_claim);
    if now >= exp {
        return Err(JwtError::Expired);
    }
    if iat.is_some_and(|i| i > now + SKEW) {
        return Err(JwtError::NotYetValid);
    }
    Ok(Claims { sun, iat, exp })
}

fn int_claim(v: &serde_json::Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
}

/// Read a jwt key file (at least 16 bytes, used as-is).
pub fn load_key(path: &Path) -> Result<Vec<u8>, JwtError> {
    let buf = std::fs::read(path).map_err(|source| JwtError::Key {
        path: path.to_path_buf(),
        source,
    })?;
    if buf.len() < 16 {
        return Err(JwtError::ShortKey(path.to_path_buf()));
    }
    Ok(buf)
}

/// `jwt_key=` from `AuthAltParameters` (comma-separated `key=value`s).
pub fn jwt_key_path(conf: &crate::conf::SlurmConf) -> Option<PathBuf> {
    let params = conf
        .entries
        .iter()
        .rev()
        .find(|(k, _)| k.eq_ignore_ascii_case("AuthAltParameters"))
        .map(|(_, v)| v.as_str())?;
    params.split(',').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k.trim().eq_ignore_ascii_case("jwt_key") && !v.trim().is_empty())
            .then(|| PathBuf::from(v.trim()))
    })
}

/// `AuthAltParameters` limits on `scontrol token`: `disable_token_creation`
/// (only root and SlurmUser may mint) and `max_token_lifespan=SECONDS`
/// (for other users).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenPolicy {
    pub creation_disabled: bool,
    pub max_lifespan: Option<i64>,
}

impl TokenPolicy {
    pub fn from_conf(conf: &crate::conf::SlurmConf) -> Result<TokenPolicy, String> {
        let mut p = TokenPolicy::default();
        for kv in conf.get("AuthAltParameters").unwrap_or("").split(',') {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            match k.trim().to_ascii_lowercase().as_str() {
                "disable_token_creation" => p.creation_disabled = true,
                "max_token_lifespan" => {
                    p.max_lifespan = Some(
                        v.trim()
                            .parse::<i64>()
                            .ok()
                            .filter(|n| *n > 0)
                            .ok_or_else(|| {
                                format!(
                                    "AuthAltParameters=max_token_lifespan={v}: expected seconds"
                                )
                            })?,
                    )
                }
                _ => {}
            }
        }
        Ok(p)
    }
}

/// The jwt key of this cluster, from `slurm.conf`.
pub fn conf_key(conf: &crate::conf::SlurmConf) -> Result<Vec<u8>, JwtError> {
    load_key(&jwt_key_path(conf).ok_or(JwtError::NoKey)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn minted_tokens_verify_until_they_expire() {
        let t = mint_token_at(KEY, "alice", 1000, 60).unwrap();
        let c = verify_token(KEY, &t, 1010).unwrap();
        assert_eq!(c.sun, "alice");
        assert_eq!(c.exp, 1060);
        assert_eq!(c.iat, Some(1000));
        assert!(matches!(
            verify_token(KEY, &t, 1060),
            Err(JwtError::Expired)
        ));
        assert!(matches!(
            verify_token(KEY, &t, 800),
            Err(JwtError::NotYetValid)
        ));
        assert!(matches!(
            verify_token(b"another key of 16 bytes", &t, 1010),
            Err(JwtError::Signature)
        ));
        assert!(matches!(
            mint_token_at(KEY, "a", 0, 0),
            Err(JwtError::Lifespan)
        ));
    }

    #[test]
    fn forged_and_garbage_tokens_are_refused() {
        let t = mint_token_at(KEY, "alice", 1000, 60).unwrap();
        let parts: Vec<&str> = t.split('.').collect();
        let evil = URL_SAFE_NO_PAD.encode(br#"{"exp":99999,"iat":1000,"sun":"root"}"#);
        let forged = format!("{}.{}.{}", parts[0], evil, parts[2]);
        assert!(matches!(
            verify_token(KEY, &forged, 1010),
            Err(JwtError::Signature)
        ));
        let none_alg = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let t2 = format!("{none_alg}.{}.", parts[1]);
        assert!(matches!(
            verify_token(KEY, &t2, 1010),
            Err(JwtError::Algorithm(_))
        ));
        for junk in ["", "a.b", "a.b.c.d", "!!.??.##", "e30.e30.e30"] {
            assert!(verify_token(KEY, junk, 1010).is_err(), "{junk}");
        }
    }

    #[test]
    fn key_path_comes_from_auth_alt_parameters() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("slurm.conf");
        let key = d.path().join("jwt.key");
        std::fs::write(&key, KEY).unwrap();
        let text = format!(
            "ClusterName=c\nSlurmctldHost=h\nAuthAltTypes=auth/jwt\nAuthAltParameters=disable_token_creation,jwt_key={}\n\
             NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n",
            key.display()
        );
        std::fs::write(&p, &text).unwrap();
        let conf = crate::conf::SlurmConf::load(&p).unwrap();
        assert_eq!(jwt_key_path(&conf), Some(key.clone()));
        assert_eq!(conf_key(&conf).unwrap(), KEY);
        std::fs::write(&key, b"short").unwrap();
        assert!(matches!(conf_key(&conf), Err(JwtError::ShortKey(_))));
    }
}
