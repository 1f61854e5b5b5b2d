//! Maps a container image (and command) to a host program (contract item 3): there is no
//! container runtime here, so an "image" only chooses which local binary a pod process runs.

use std::path::{Path, PathBuf};

use super::error::KiabError;

/// The node programs kube-in-a-box knows how to run for an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeProgram {
    TesseraNode,
    RedisServer,
    ValkeyServer,
}

impl NodeProgram {
    fn from_basename(name: &str) -> Option<Self> {
        match name {
            "tessera-node" => Some(Self::TesseraNode),
            "redis-server" => Some(Self::RedisServer),
            "valkey-server" => Some(Self::ValkeyServer),
            _ => None,
        }
    }

    /// The image's default program, from the repository part of the reference.
    pub fn from_image(image: &str) -> Option<Self> {
        let repo = image_repository(image);
        let last = repo.rsplit('/').next().unwrap_or(repo);
        if last.ends_with("tessera-node") {
            Some(Self::TesseraNode)
        } else if last == "redis" {
            Some(Self::RedisServer)
        } else if last == "valkey" {
            Some(Self::ValkeyServer)
        } else {
            None
        }
    }

    /// Where the program lives on this machine.
    pub fn locate(self) -> Result<PathBuf, KiabError> {
        match self {
            Self::TesseraNode => {
                let root = workspace_root();
                // The most recently built of the two: a stale release build must not
                // shadow the debug build `make test` just made (or the reverse for `make demo`).
                ["release", "debug"]
                    .iter()
                    .map(|p| root.join("target").join(p).join("tessera-node"))
                    .filter_map(|p| {
                        let built = std::fs::metadata(&p).ok()?.modified().ok()?;
                        p.is_file().then_some((built, p))
                    })
                    .max_by_key(|(built, _)| *built)
                    .map(|(_, p)| p)
                    .ok_or_else(|| {
                        KiabError::Image(format!(
                            "tessera-node is not built (looked in {}/target/{{release,debug}}); run `cargo build -p tessera-node`",
                            root.display()
                        ))
                    })
            }
            Self::RedisServer => reference_program("redis-server"),
            Self::ValkeyServer => reference_program("valkey-server"),
        }
    }
}

/// Strips registry-free tag/digest: `docker.io/library/redis:7.0@sha..` → `docker.io/library/redis`.
fn image_repository(image: &str) -> &str {
    let no_digest = image.split('@').next().unwrap_or(image);
    // A ':' after the last '/' is a tag; one before it is a registry port.
    match (no_digest.rfind(':'), no_digest.rfind('/')) {
        (Some(c), Some(s)) if c > s => &no_digest[..c],
        (Some(c), None) => &no_digest[..c],
        _ => no_digest,
    }
}

/// The workspace root: this crate's manifest dir's parent.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// A reference server: PATH first, then the workspace's `.tools/bin` (where
/// `scripts/install-deps.sh` puts what Debian does not package).
fn reference_program(name: &str) -> Result<PathBuf, KiabError> {
    which(name)
        .or_else(|| {
            let p = workspace_root().join(".tools/bin").join(name);
            p.is_file().then_some(p)
        })
        .ok_or_else(|| {
            KiabError::Image(format!(
                "{name} not found on PATH or in .tools/bin: run `make deps` (scripts/install-deps.sh)"
            ))
        })
}

/// Looks a program up on PATH (hand-rolled: a dozen lines, not worth a dependency).
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Resolves the argv a container runs: `(program, args)`, before `$(VAR)` expansion.
///
/// - `command[0]` whose basename is a node program → that program's local binary;
/// - any other `command[0]` → looked up on the host (e.g. `sh`);
/// - no command → the image's program (its entrypoint) with `args`.
pub fn resolve_argv(
    image: &str,
    command: &[String],
    args: &[String],
) -> Result<(PathBuf, Vec<String>), KiabError> {
    if let Some(first) = command.first() {
        let base = first.rsplit('/').next().unwrap_or(first);
        let rest: Vec<String> = command[1..].iter().chain(args.iter()).cloned().collect();
        if let Some(p) = NodeProgram::from_basename(base) {
            return Ok((p.locate()?, rest));
        }
        let prog = which(first)
            .or_else(|| which(base))
            .ok_or_else(|| KiabError::Image(format!("command {first:?} not found on host")))?;
        return Ok((prog, rest));
    }
    let p = NodeProgram::from_image(image).ok_or_else(|| {
        KiabError::Image(format!(
            "image {image:?} maps to no local program (known: *tessera-node, redis, valkey/valkey) and the container has no command"
        ))
    })?;
    Ok((p.locate()?, args.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_mapping() {
        use NodeProgram::*;
        assert_eq!(
            NodeProgram::from_image("tessera/tessera-node:0.1.0"),
            Some(TesseraNode)
        );
        assert_eq!(
            NodeProgram::from_image("ghcr.io/x/tessera-node"),
            Some(TesseraNode)
        );
        assert_eq!(NodeProgram::from_image("redis:7.0"), Some(RedisServer));
        assert_eq!(
            NodeProgram::from_image("docker.io/library/redis:7.0.15@sha256:ab"),
            Some(RedisServer)
        );
        assert_eq!(
            NodeProgram::from_image("localhost:5000/redis"),
            Some(RedisServer)
        );
        assert_eq!(
            NodeProgram::from_image("valkey/valkey:8"),
            Some(ValkeyServer)
        );
        assert_eq!(NodeProgram::from_image("nginx:1"), None);
        assert_eq!(NodeProgram::from_image("redisx:1"), None);
    }

    #[test]
    fn argv_resolution() {
        let (p, a) = resolve_argv("redis:7.0", &[], &["--port".into(), "7000".into()])
            .expect("redis-server is installed");
        assert!(p.ends_with("redis-server"));
        assert_eq!(a, vec!["--port", "7000"]);
        let (p, a) = resolve_argv(
            "nginx",
            &["/usr/local/bin/redis-server".into(), "x.conf".into()],
            &["--port".into()],
        )
        .expect("basename selects redis-server");
        assert!(p.ends_with("redis-server"));
        assert_eq!(a, vec!["x.conf", "--port"]);
        let (p, _) = resolve_argv("busybox", &["sh".into()], &[]).expect("sh exists");
        assert!(p.ends_with("sh"));
        assert!(resolve_argv("nginx:1", &[], &[]).is_err());
    }
}
