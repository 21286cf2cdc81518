//! The wasm OCI artifact: an image manifest with a wasm config and the component as its layer
//! (CNCF TAG Runtime's wasm OCI artifact layout, as `wkg` and wassette write it), plus toolhost's
//! optional signature layer.

use serde::{Deserialize, Serialize};

/// The manifest's media type.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The config blob's media type.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The component layer's media type.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The layer holding a minisign signature of the component layer's bytes (the text of a
/// `.minisig` file).
pub const SIGNATURE_MEDIA_TYPE: &str = "application/vnd.toolhost.minisign.signature";

/// A blob as a manifest names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Its media type.
    pub media_type: String,
    /// `sha256:HEX`.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// Free annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
}

impl Descriptor {
    /// The descriptor of `bytes` as `media_type`.
    pub fn of(media_type: &str, bytes: &[u8]) -> Self {
        Descriptor {
            media_type: media_type.to_string(),
            digest: crate::sha256_digest(bytes),
            size: bytes.len() as u64,
            annotations: None,
        }
    }
}

/// An OCI image manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// [`MANIFEST_MEDIA_TYPE`] (optional in the spec; checked when present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The artifact type, when the pusher set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
    /// Free annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
}

/// The config blob (`application/vnd.wasm.config.v0+json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    /// RFC 3339 creation time.
    pub created: String,
    /// Who made it.
    pub author: Option<String>,
    /// Always `wasm`.
    pub architecture: String,
    /// `wasip2` for a component.
    pub os: String,
    /// The layers' digests, in manifest order.
    pub layer_digests: Vec<String>,
    /// What the component imports and exports.
    pub component: Option<ComponentInfo>,
}

/// A component's world, as the config lists it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ComponentInfo {
    /// Exported interfaces.
    pub exports: Vec<String>,
    /// Imported interfaces.
    pub imports: Vec<String>,
    /// The WIT world, when known.
    pub target: Option<String>,
}

/// The layers of a wasm artifact that toolhost uses.
#[derive(Debug, Clone)]
pub struct ArtifactLayers {
    /// The component.
    pub wasm: Descriptor,
    /// The minisign signature of the component, if the artifact carries one.
    pub signature: Option<Descriptor>,
}

impl Manifest {
    /// Parse and check that this is a wasm component artifact: the manifest and config media
    /// types, exactly one `application/wasm` layer, at most one signature layer, and valid
    /// digests everywhere. `Err` says what is wrong.
    pub fn parse_wasm(bytes: &[u8]) -> Result<(Manifest, ArtifactLayers), String> {
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| format!("the manifest is not valid JSON: {e}"))?;
        if m.schema_version != 2 {
            return Err(format!("manifest schemaVersion {} (expected 2)", m.schema_version));
        }
        if let Some(mt) = &m.media_type {
            if mt != MANIFEST_MEDIA_TYPE {
                return Err(format!("manifest media type {mt} (expected {MANIFEST_MEDIA_TYPE})"));
            }
        }
        if m.config.media_type != CONFIG_MEDIA_TYPE {
            return Err(format!("config media type {} (expected {CONFIG_MEDIA_TYPE})", m.config.media_type));
        }
        for d in std::iter::once(&m.config).chain(&m.layers) {
            if !crate::valid_digest(&d.digest) {
                return Err(format!("descriptor digest '{}' is not sha256:HEX", d.digest));
            }
        }
        let wasm: Vec<&Descriptor> = m.layers.iter().filter(|l| l.media_type == WASM_LAYER_MEDIA_TYPE).collect();
        let sigs: Vec<&Descriptor> = m.layers.iter().filter(|l| l.media_type == SIGNATURE_MEDIA_TYPE).collect();
        let wasm = match wasm.as_slice() {
            [one] => (*one).clone(),
            [] => {
                let types: Vec<&str> = m.layers.iter().map(|l| l.media_type.as_str()).collect();
                return Err(format!("no {WASM_LAYER_MEDIA_TYPE} layer (layers: {})", types.join(", ")));
            }
            _ => return Err(format!("{} {WASM_LAYER_MEDIA_TYPE} layers (expected one)", wasm.len())),
        };
        if sigs.len() > 1 {
            return Err(format!("{} signature layers (expected at most one)", sigs.len()));
        }
        let signature = sigs.first().map(|d| (*d).clone());
        Ok((m, ArtifactLayers { wasm, signature }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(config_type: &str, layers: &[(&str, &[u8])]) -> Vec<u8> {
        let m = Manifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.into()),
            artifact_type: None,
            config: Descriptor::of(config_type, b"{}"),
            layers: layers.iter().map(|(t, b)| Descriptor::of(t, b)).collect(),
            annotations: None,
        };
        serde_json::to_vec(&m).unwrap()
    }

    #[test]
    fn accepts_the_wasm_layout_and_refuses_others() {
        let (_, l) = Manifest::parse_wasm(&manifest(CONFIG_MEDIA_TYPE, &[(WASM_LAYER_MEDIA_TYPE, b"w")])).unwrap();
        assert!(l.signature.is_none() && l.wasm.size == 1);
        let (_, l) = Manifest::parse_wasm(&manifest(
            CONFIG_MEDIA_TYPE,
            &[(WASM_LAYER_MEDIA_TYPE, b"w"), (SIGNATURE_MEDIA_TYPE, b"sig")],
        ))
        .unwrap();
        assert_eq!(l.signature.unwrap().size, 3);
        let e = Manifest::parse_wasm(&manifest("application/vnd.oci.image.config.v1+json", &[])).unwrap_err();
        assert!(e.contains("config media type"), "{e}");
        let e = Manifest::parse_wasm(&manifest(CONFIG_MEDIA_TYPE, &[("application/vnd.oci.image.layer.v1.tar", b"x")]))
            .unwrap_err();
        assert!(e.contains("no application/wasm layer") && e.contains("layer.v1.tar"), "{e}");
        let two = manifest(CONFIG_MEDIA_TYPE, &[(WASM_LAYER_MEDIA_TYPE, b"a"), (WASM_LAYER_MEDIA_TYPE, b"b")]);
        assert!(Manifest::parse_wasm(&two).unwrap_err().contains("2 application/wasm"));
        let bad_digest = String::from_utf8(manifest(CONFIG_MEDIA_TYPE, &[(WASM_LAYER_MEDIA_TYPE, b"w")]))
            .unwrap()
            .replace("sha256:", "sha256:../");
        assert!(Manifest::parse_wasm(bad_digest.as_bytes()).unwrap_err().contains("not sha256"));
    }
}
