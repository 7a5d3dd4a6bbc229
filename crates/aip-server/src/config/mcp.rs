//! The `[mcp]` section (spec 21.1): the MCP endpoint, its OAuth resource-server mode, its prompt
//! templates and its capability-backed resource templates.

use std::path::PathBuf;

use serde::Deserialize;

/// `[mcp]` configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// Serve MCP at `/mcp` (and `/mcp/v1`, `/aip/v1/mcp`). Default on.
    #[serde(default = "super::yes")]
    pub enabled: bool,
    /// OAuth resource-server mode: JWT access tokens accepted beside the static bearer tokens.
    #[serde(default)]
    pub oauth: Option<OAuthConfig>,
    /// Prompt templates offered by `prompts/list` and `prompts/get`.
    #[serde(default)]
    pub prompts: Vec<PromptConfig>,
    /// Resource templates whose content a read-only capability produces per read.
    #[serde(default)]
    pub resource_templates: Vec<TemplateConfig>,
    /// Development only: a configured principal that MCP requests without any `Authorization`
    /// header act as (for clients that cannot send one, such as the MCP conformance suite).
    /// Refused at startup unless `aip serve` listens on a loopback address.
    #[serde(default)]
    pub dev_principal: Option<String>,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            oauth: None,
            prompts: Vec::new(),
            resource_templates: Vec::new(),
            dev_principal: None,
        }
    }
}

/// `[mcp.oauth]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuthConfig {
    /// The authorization server's issuer (`iss` must equal it).
    pub issuer: String,
    /// The MCP resource URL (`aud` must contain it); also the metadata's `resource`.
    pub audience: String,
    /// JSON Web Key Set file with the issuer's verification keys (RS256, ES256 or EdDSA).
    pub jwks_file: PathBuf,
    /// Scopes every token needs for the MCP endpoint (403 `insufficient_scope` otherwise).
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// Tenant of a subject that is not mapped to a configured principal.
    #[serde(default = "super::default_tenant")]
    pub tenant: String,
    /// Subjects bound to configured principals (their kind, tenant and scopes apply).
    #[serde(default)]
    pub subjects: Vec<SubjectConfig>,
}

/// One `[[mcp.oauth.subjects]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubjectConfig {
    /// The token's `sub`.
    pub sub: String,
    /// A `[[principals]]` id.
    pub principal: String,
}

/// One `[[mcp.resource_templates]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateConfig {
    /// The URI template: literal text and `{name}` variables (RFC 6570 level 1); a variable
    /// matches one or more characters other than `/`.
    pub uri_template: String,
    /// Display name.
    pub name: String,
    /// What it serves.
    #[serde(default)]
    pub description: Option<String>,
    /// The content's MIME type (default `application/json`).
    #[serde(default)]
    pub mime_type: Option<String>,
    /// The read-only capability that produces the content.
    pub capability: String,
}

/// One `[[mcp.prompts]]` template.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptConfig {
    /// Prompt name (what `prompts/get` names).
    pub name: String,
    /// Display title.
    #[serde(default)]
    pub title: Option<String>,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Vec<PromptArgument>,
    /// The messages, with `{{argument}}` placeholders.
    pub messages: Vec<PromptMessage>,
}

/// A prompt argument.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptArgument {
    /// Name (the placeholder is `{{name}}`).
    pub name: String,
    /// What to pass.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether `prompts/get` must give it.
    #[serde(default)]
    pub required: bool,
    /// The values `completion/complete` offers for it (those starting with what was typed).
    #[serde(default)]
    pub values: Vec<String>,
}

/// A prompt message: exactly one of `text`, `image` and `resource`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// Text with placeholders.
    #[serde(default)]
    pub text: Option<String>,
    /// An image.
    #[serde(default)]
    pub image: Option<PromptImage>,
    /// An embedded resource.
    #[serde(default)]
    pub resource: Option<PromptResource>,
}

/// An image in a prompt: base64 `data`, or a `file` under `resource_root` read at startup.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptImage {
    /// Its media type (`image/png`, ...).
    pub mime_type: String,
    /// Base64 content.
    #[serde(default)]
    pub data: Option<String>,
    /// A file under `resource_root`, by relative path.
    #[serde(default)]
    pub file: Option<std::path::PathBuf>,
}

/// A resource embedded in a prompt (`{"type": "resource"}`): its URI and text, both with
/// placeholders.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptResource {
    /// The resource's URI.
    pub uri: String,
    /// Its media type.
    #[serde(default)]
    pub mime_type: Option<String>,
    /// Its text.
    pub text: String,
}
