//! `view_image` (DeerFlow `H/tools/builtins/view_image_tool.py`, vision models only) and the
//! ViewImageMiddleware's read side: the tool checks an image under the thread's workspace,
//! uploads or outputs and records its metadata in `viewed_images`; [`image_details_content`]
//! re-reads the recorded images into the message DeerFlow injects before the next model call.

use std::path::PathBuf;

use async_trait::async_trait;
use base64::Engine;
use serde_json::{json, Map, Value};
use toolhost_core::{
    CallContext, ContentPart, FsError, StateUpdate, ThreadFs, ThreadState, Tool, ToolOutcome, ToolSpec,
};

use crate::TRAVERSAL;
use crate::{args_object, builtin_spec, invalid_args};

const NAME: &str = "view_image";
const ALLOWED_ROOTS: [&str; 3] = ["/mnt/user-data/workspace", "/mnt/user-data/uploads", "/mnt/user-data/outputs"];
/// 20 MiB, DeerFlow's `_MAX_IMAGE_BYTES`.
pub const MAX_IMAGE_BYTES: u64 = 20 * 1024 * 1024;
const EXTENSION_TO_MIME: [(&str, &str); 5] = [
    (".jpg", "image/jpeg"),
    (".jpeg", "image/jpeg"),
    (".png", "image/png"),
    (".webp", "image/webp"),
    (".gif", "image/gif"),
];

pub struct ViewImageTool {
    spec: ToolSpec,
}

impl ViewImageTool {
    pub fn new() -> Self {
        Self { spec: builtin_spec(NAME) }
    }
}

impl Default for ViewImageTool {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Tool for ViewImageTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, ctx: &CallContext, args: Value) -> ToolOutcome {
        let obj = match args_object(NAME, &args) {
            Ok(o) => o,
            Err(outcome) => return *outcome,
        };
        let image_path = match obj.get("image_path") {
            Some(Value::String(p)) => p.clone(),
            Some(other) => return invalid_args(NAME, format!("image_path must be a string, got {other}")),
            None => return invalid_args(NAME, "image_path is required"),
        };
        let fs = ctx.fs.clone();
        // Up to 20 MiB of blocking reads: keep them off the async workers.
        let result = tokio::task::spawn_blocking(move || view_image(&fs, &image_path)).await;
        match result {
            Ok(Ok(viewed)) => {
                let mut images = Map::new();
                images.insert(viewed.image_path.clone(), viewed.metadata());
                ToolOutcome::text("Successfully read image")
                    .with_update(StateUpdate { viewed_images: Some(images), ..Default::default() })
            }
            Ok(Err(message)) => ToolOutcome::error(message),
            Err(join) => ToolOutcome::error(format!("Error reading image file: {join}")),
        }
    }
}

/// A checked image: what goes into `viewed_images[image_path]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ViewedImage {
    pub image_path: String,
    pub mime_type: String,
    pub size: u64,
    pub actual_path: PathBuf,
}

impl ViewedImage {
    /// DeerFlow's `ViewedImageData`: `{mime_type, size, actual_path}` (no image bytes in state).
    pub fn metadata(&self) -> Value {
        json!({"mime_type": self.mime_type, "size": self.size, "actual_path": self.actual_path.to_string_lossy()})
    }
}

/// DeerFlow's checks, in its order: allowed virtual root, path validation with symlinks
/// resolved inside the thread, supported extension, existence, regular file, size, read, magic
/// bytes matching the extension. The file is read through the thread filesystem layer (no link
/// followed out of the thread, no FIFO opened, at most 20 MiB read). The error is the full
/// model-visible text (`Error: …`).
pub fn view_image(fs: &ThreadFs, image_path: &str) -> Result<ViewedImage, String> {
    let allowed = ALLOWED_ROOTS.iter().any(|root| image_path == *root || image_path.starts_with(&format!("{root}/")));
    if !allowed {
        return Err(format!("Error: Only image paths under {} are allowed", ALLOWED_ROOTS.join(", ")));
    }
    let resolved = match fs.resolve(image_path) {
        Ok(r) => r,
        Err(FsError::Loop(_)) => return Err(format!("Error: Too many levels of symbolic links: {image_path}")),
        Err(_) => return Err(format!("Error: {TRAVERSAL}")),
    };
    let suffix = py_suffix(image_path).to_lowercase();
    let Some(expected_mime) = EXTENSION_TO_MIME.iter().find(|(ext, _)| *ext == suffix).map(|(_, m)| *m) else {
        let supported: Vec<&str> = EXTENSION_TO_MIME.iter().map(|(e, _)| *e).collect();
        return Err(format!("Error: Unsupported image format: {suffix}. Supported formats: {}", supported.join(", ")));
    };
    let file = match fs.open_resolved(&resolved, image_path) {
        Ok(f) => f,
        Err(FsError::NotFound(_)) => return Err(format!("Error: Image file not found: {image_path}")),
        Err(FsError::NotRegular { .. }) => return Err(format!("Error: Path is not a file: {image_path}")),
        Err(FsError::Changed { .. }) => return Err(format!("Error: {TRAVERSAL}")),
        Err(e) => return Err(format!("Error reading image metadata: {e}")),
    };
    let size = file.len;
    if size > MAX_IMAGE_BYTES {
        return Err(too_large(size));
    }
    let data = match file.read_capped(size) {
        Ok(d) => d,
        Err(FsError::TooLarge { .. }) => return Err("Error: Image file changed during read".to_string()),
        Err(e) => return Err(format!("Error reading image file: {e}")),
    };
    if data.len() as u64 != size {
        return Err("Error: Image file changed during read".to_string());
    }
    let Some(detected) = detect_image_mime(&data) else {
        return Err("Error: File contents do not match a supported image format".to_string());
    };
    if detected != expected_mime {
        return Err(format!("Error: Image contents are {detected}, but file extension indicates {expected_mime}"));
    }
    let actual_path = fs.host_path(&resolved);
    Ok(ViewedImage { image_path: image_path.to_string(), mime_type: detected.to_string(), size, actual_path })
}

fn too_large(size: u64) -> String {
    format!("Error: Image file is too large: {size} bytes. Maximum supported size is {MAX_IMAGE_BYTES} bytes")
}

/// Python's `PurePath.suffix`: the last `.ext` of the final component; empty for `.hidden`, a
/// trailing dot, or no dot.
pub fn py_suffix(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.rfind('.') {
        Some(i) if i > 0 && i < name.len() - 1 => &name[i..],
        _ => "",
    }
}

/// DeerFlow's `_detect_image_mime` magic-byte check.
pub fn detect_image_mime(data: &[u8]) -> Option<&'static str> {
    if data.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if data.len() >= 12 && data.starts_with(b"RIFF") && &data[8..12] == b"WEBP" {
        Some("image/webp")
    } else if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        Some("image/gif")
    } else {
        None
    }
}

/// ViewImageMiddleware's `_create_image_details_message`: the content of the transient human
/// message injected once every `view_image` call of the last assistant turn has completed.
/// Each image is read again from its virtual path under the current thread; it is sent only if it
/// still resolves to the recorded `actual_path` with the recorded size and mime type, else the
/// message says it is unavailable.
pub fn image_details_content(state: &ThreadState, fs: &ThreadFs) -> Vec<ContentPart> {
    if state.viewed_images.is_empty() {
        return vec![ContentPart::Text { text: "No images have been viewed.".into() }];
    }
    let mut parts = vec![ContentPart::Text { text: "Here are the images you've viewed:".into() }];
    for (image_path, data) in &state.viewed_images {
        let mime = data.get("mime_type").and_then(Value::as_str).unwrap_or("unknown");
        parts.push(ContentPart::Text { text: format!("\n- **{image_path}** ({mime})") });
        match reread(fs, image_path, data) {
            Some(bytes) => parts.push(ContentPart::Image {
                data: base64::engine::general_purpose::STANDARD.encode(bytes),
                mime_type: mime.to_string(),
            }),
            None => parts.push(ContentPart::Text { text: format!("  (file unavailable or changed: {image_path})") }),
        }
    }
    parts
}

fn reread(fs: &ThreadFs, image_path: &str, recorded: &Value) -> Option<Vec<u8>> {
    let viewed = view_image(fs, image_path).ok()?;
    let same_path = recorded.get("actual_path").and_then(Value::as_str) == Some(&*viewed.actual_path.to_string_lossy());
    let same_size = recorded.get("size").and_then(Value::as_u64) == Some(viewed.size);
    let same_mime = recorded.get("mime_type").and_then(Value::as_str) == Some(viewed.mime_type.as_str());
    if !(same_path && same_size && same_mime) {
        return None;
    }
    let bytes = fs.open_regular(image_path).ok()?.read_capped(MAX_IMAGE_BYTES).ok()?;
    (bytes.len() as u64 == viewed.size && detect_image_mime(&bytes) == Some(viewed.mime_type.as_str())).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::thread;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    const GIF: &[u8] = b"GIF89a\x01\0\x01\0";

    async fn call(ctx: &CallContext, path: &str) -> ToolOutcome {
        ViewImageTool::new().call(ctx, json!({ "image_path": path })).await
    }

    #[tokio::test]
    async fn reads_a_valid_image_into_viewed_images() {
        let (_dir, ctx) = thread();
        std::fs::write(ctx.paths().uploads().join("a.PNG"), PNG).unwrap();
        let out = call(&ctx, "/mnt/user-data/uploads/a.PNG").await;
        assert!(!out.is_error(), "{}", out.text_content());
        assert_eq!(out.text_content(), "Successfully read image");
        let images = out.update.viewed_images.unwrap();
        let actual = std::fs::canonicalize(ctx.paths().uploads().join("a.PNG")).unwrap();
        assert_eq!(
            images["/mnt/user-data/uploads/a.PNG"],
            json!({"mime_type": "image/png", "size": PNG.len(), "actual_path": actual.to_string_lossy()})
        );
    }

    #[tokio::test]
    async fn path_rules() {
        let (dir, ctx) = thread();
        let only = "Error: Only image paths under /mnt/user-data/workspace, /mnt/user-data/uploads, /mnt/user-data/outputs are allowed";
        let outside = dir.path().join("x.png");
        std::fs::write(&outside, PNG).unwrap();
        for bad in [
            outside.to_string_lossy().as_ref(),
            "/mnt/user-data/x.png",
            "/mnt/skills/a.png",
            "/mnt/user-data/workspacex/a.png",
        ] {
            assert_eq!(call(&ctx, bad).await.text_content(), only, "{bad}");
        }
        assert_eq!(
            call(&ctx, "/mnt/user-data/workspace/../../x.png").await.text_content(),
            "Error: Access denied: path traversal detected"
        );
        // A symlink in uploads that points outside the thread is refused.
        std::os::unix::fs::symlink(&outside, ctx.paths().uploads().join("evil.png")).unwrap();
        let out = call(&ctx, "/mnt/user-data/uploads/evil.png").await;
        assert!(out.is_error());
        assert_eq!(out.text_content(), "Error: Access denied: path traversal detected");
        assert!(out.update.viewed_images.is_none());
        // One that stays inside is fine.
        std::fs::write(ctx.paths().workspace().join("real.png"), PNG).unwrap();
        std::os::unix::fs::symlink(ctx.paths().workspace().join("real.png"), ctx.paths().outputs().join("ok.png"))
            .unwrap();
        assert!(!call(&ctx, "/mnt/user-data/outputs/ok.png").await.is_error());
    }

    #[tokio::test]
    async fn file_checks_in_deerflow_order() {
        let (_dir, ctx) = thread();
        let ws = ctx.paths().workspace();
        assert_eq!(
            call(&ctx, "/mnt/user-data/workspace/missing.txt").await.text_content(),
            "Error: Unsupported image format: .txt. Supported formats: .jpg, .jpeg, .png, .webp, .gif"
        );
        assert_eq!(
            call(&ctx, "/mnt/user-data/workspace/missing.png").await.text_content(),
            "Error: Image file not found: /mnt/user-data/workspace/missing.png"
        );
        std::fs::create_dir(ws.join("dir.png")).unwrap();
        assert_eq!(
            call(&ctx, "/mnt/user-data/workspace/dir.png").await.text_content(),
            "Error: Path is not a file: /mnt/user-data/workspace/dir.png"
        );
        std::fs::write(ws.join("text.png"), b"hello, not an image").unwrap();
        assert_eq!(
            call(&ctx, "/mnt/user-data/workspace/text.png").await.text_content(),
            "Error: File contents do not match a supported image format"
        );
        std::fs::write(ws.join("gif.png"), GIF).unwrap();
        assert_eq!(
            call(&ctx, "/mnt/user-data/workspace/gif.png").await.text_content(),
            "Error: Image contents are image/gif, but file extension indicates image/png"
        );
        let big = std::fs::File::create(ws.join("big.jpg")).unwrap();
        big.set_len(MAX_IMAGE_BYTES + 1).unwrap();
        assert_eq!(
            call(&ctx, "/mnt/user-data/workspace/big.jpg").await.text_content(),
            format!(
                "Error: Image file is too large: {} bytes. Maximum supported size is 20971520 bytes",
                MAX_IMAGE_BYTES + 1
            )
        );
        assert_eq!(
            call(&ctx, "/mnt/user-data/workspace").await.text_content(),
            "Error: Unsupported image format: . Supported formats: .jpg, .jpeg, .png, .webp, .gif"
        );
        let out = ViewImageTool::new().call(&ctx, json!({"image_path": 3})).await;
        assert!(out.is_error() && out.text_content().contains("image_path must be a string"));
    }

    #[test]
    fn magic_bytes_and_suffixes() {
        assert_eq!(detect_image_mime(b"\xff\xd8\xff\xe0"), Some("image/jpeg"));
        assert_eq!(detect_image_mime(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(detect_image_mime(b"RIFF\0\0\0\0WAVE"), None);
        assert_eq!(detect_image_mime(b"GIF87a"), Some("image/gif"));
        assert_eq!(py_suffix("/a/b.tar.gz"), ".gz");
        assert_eq!(py_suffix("/a/.png"), "");
        assert_eq!(py_suffix("/a/b."), "");
        assert_eq!(py_suffix("/a.d/b"), "");
    }

    #[tokio::test]
    async fn middleware_content_rereads_recorded_images() {
        let (_dir, ctx) = thread();
        let mut state = ThreadState::default();
        assert_eq!(
            image_details_content(&state, &ctx.fs),
            [ContentPart::Text { text: "No images have been viewed.".into() }]
        );
        std::fs::write(ctx.paths().workspace().join("a.gif"), GIF).unwrap();
        std::fs::write(ctx.paths().workspace().join("b.png"), PNG).unwrap();
        for p in ["/mnt/user-data/workspace/a.gif", "/mnt/user-data/workspace/b.png"] {
            state.apply(&call(&ctx, p).await.update).unwrap();
        }
        std::fs::write(ctx.paths().workspace().join("b.png"), b"\x89PNG\r\n\x1a\nchanged size").unwrap();
        let parts = image_details_content(&state, &ctx.fs);
        let encoded = base64::engine::general_purpose::STANDARD.encode(GIF);
        assert_eq!(
            parts,
            [
                ContentPart::Text { text: "Here are the images you've viewed:".into() },
                ContentPart::Text { text: "\n- **/mnt/user-data/workspace/a.gif** (image/gif)".into() },
                ContentPart::Image { data: encoded, mime_type: "image/gif".into() },
                ContentPart::Text { text: "\n- **/mnt/user-data/workspace/b.png** (image/png)".into() },
                ContentPart::Text { text: "  (file unavailable or changed: /mnt/user-data/workspace/b.png)".into() },
            ]
        );
    }
}
