//! Resources (spec 9.7, 9.8): readable resources declared by the operator, with a read policy that
//! decides who may even learn that a resource exists. A principal that may not list a resource finds
//! it in no list, no count and no manifest, and reading it answers "not found" exactly like a
//! missing id. Expired resources are gone. Content is inline parts, a file under a configured
//! root (read at request time within a size bound, binary as base64), or the output of a sync,
//! read-only capability run as the reader's own action at each read.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aip_core::{
    MessagePart, Resource, ResourceList, ResourceListRequest, ResourceReadRequest,
    ResourceReadResult,
};
use base64::Engine as _;

use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::runtime::Runtime;
use crate::scope::SCOPE_ALL;

/// Largest file content served by one read (4 MiB; base64 grows it by a third).
pub const MAX_RESOURCE_BYTES: u64 = 4 * 1024 * 1024;
/// Most resources one runtime declares.
pub const MAX_RESOURCES: usize = 10_000;

/// Where a resource's content comes from.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ResourceContent {
    /// Parts given in the declaration.
    Inline(Vec<MessagePart>),
    /// A file, by its canonical path under the operator's resource root.
    File(PathBuf),
    /// Produced at each read by a sync, read-only capability, run as a native action of the
    /// reader with `{"resource_id": ...}` as input; its output is the content.
    Produced(aip_core::CapabilityId),
}

/// One declared resource: its metadata (what a permitted reader sees) and its content.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceEntry {
    /// The wire metadata.
    pub resource: Resource,
    /// The content.
    pub content: ResourceContent,
}

/// Why a resource declaration cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resource {id}: {reason}")]
pub struct ResourceError {
    /// The resource.
    pub id: String,
    /// What is wrong.
    pub reason: String,
}

impl ResourceEntry {
    /// A file resource: `relative` must name a regular file inside `root` (after resolving links),
    /// no larger than [`MAX_RESOURCE_BYTES`].
    pub fn file(resource: Resource, root: &Path, relative: &Path) -> Result<Self, ResourceError> {
        let error = |reason: String| ResourceError {
            id: resource.id.clone(),
            reason,
        };
        if relative.is_absolute() {
            return Err(error(
                "the file must be relative to the resource root".into(),
            ));
        }
        let root = root
            .canonicalize()
            .map_err(|e| error(format!("resource root {}: {e}", root.display())))?;
        let path = root
            .join(relative)
            .canonicalize()
            .map_err(|e| error(format!("file {}: {e}", relative.display())))?;
        if !path.starts_with(&root) {
            return Err(error(format!(
                "file {} resolves outside the resource root",
                relative.display()
            )));
        }
        let meta = std::fs::metadata(&path).map_err(|e| error(e.to_string()))?;
        if !meta.is_file() || meta.len() > MAX_RESOURCE_BYTES {
            return Err(error(format!(
                "file {} must be a regular file of at most 4 MiB",
                relative.display()
            )));
        }
        Ok(Self {
            resource,
            content: ResourceContent::File(path),
        })
    }
}

/// Whether `capability` may produce resource content: it runs sync and only reads (a read must
/// not change anything).
pub fn may_produce(capability: &aip_core::Capability) -> bool {
    let contract = capability.contract.as_ref();
    contract.is_some_and(|c| {
        c.side_effects
            .iter()
            .all(|s| *s == aip_core::SideEffect::Read)
            && c.execution.supports_sync
    })
}

/// Checks a declared set: unique ids, bounded count, well-formed metadata, owning capabilities that
/// exist (`known_capability`).
pub fn check_resources(
    entries: &[ResourceEntry],
    known_capability: impl Fn(&str) -> bool,
) -> Result<(), ResourceError> {
    if entries.len() > MAX_RESOURCES {
        return Err(ResourceError {
            id: "*".into(),
            reason: format!("more than {MAX_RESOURCES} resources"),
        });
    }
    let mut seen = std::collections::BTreeSet::new();
    for e in entries {
        let r = &e.resource;
        let error = |reason: &str| ResourceError {
            id: r.id.clone(),
            reason: reason.into(),
        };
        if r.id.is_empty() || r.id.len() > 256 || r.name.is_empty() {
            return Err(error("needs an id of 1..=256 characters and a name"));
        }
        if !seen.insert(r.id.as_str()) {
            return Err(error("is declared twice"));
        }
        // Conversations are served as resources under this prefix and kind.
        if r.id.starts_with(aip_core::ConversationId::PREFIX)
            || r.kind.as_deref() == Some(crate::channel::CONVERSATION_KIND)
        {
            return Err(error(&format!(
                "ids starting with `{}` and the kind `{}` are the conversations'",
                aip_core::ConversationId::PREFIX,
                crate::channel::CONVERSATION_KIND
            )));
        }
        if let Some(v) = aip_core::Checker::check(r).first() {
            return Err(error(&format!("{}: {}", v.pointer, v.message)));
        }
        if let Some(cap) = &r.capability_id
            && !known_capability(cap.as_str())
        {
            return Err(error("names a capability that is not admitted"));
        }
    }
    Ok(())
}

impl Caller {
    /// Whether the caller may learn that `resource` exists (and read it), at `now_ms`.
    pub fn may_list_resource(&self, resource: &Resource, now_ms: i64) -> bool {
        if resource
            .expires_at
            .as_ref()
            .is_some_and(|t| t.unix_millis().is_none_or(|ms| ms <= now_ms))
        {
            return false;
        }
        // The tenant boundary is absolute (spec 22.6): a resource declared without a tenant is the
        // default tenant's, and no scope, `*` included, reaches across it.
        let tenant = resource
            .tenant_id
            .as_ref()
            .map_or(crate::caller::DEFAULT_TENANT, |t| t.as_str());
        if tenant != self.tenant {
            return false;
        }
        // A resource a capability owns is seen only by those who may invoke that capability.
        if resource
            .capability_id
            .as_ref()
            .is_some_and(|c| !self.may_invoke(c.as_str()))
        {
            return false;
        }
        let Some(access) = &resource.access else {
            // No policy: only principals holding every scope.
            return self.has(SCOPE_ALL);
        };
        if access.public
            || access
                .allowed_principals
                .iter()
                .any(|p| p.as_str() == self.id)
            || access.required_scopes.iter().any(|s| self.has(s))
        {
            return true;
        }
        // `*` stands for every scope, so it meets a scope-only policy; it never widens an explicit
        // list of principals (spec 9.7: the read policy binds every principal).
        access.allowed_principals.is_empty()
            && !access.required_scopes.is_empty()
            && self.has(SCOPE_ALL)
    }
}

/// The entries of `all` that `caller` may list now.
fn visible<'a>(
    all: &'a [ResourceEntry],
    caller: &'a Caller,
) -> impl Iterator<Item = &'a ResourceEntry> {
    let now = now_ms();
    all.iter()
        .filter(move |e| caller.may_list_resource(&e.resource, now))
}

impl Runtime {
    /// The declared resources as they are now (a snapshot: sources such as upstream MCP servers
    /// replace theirs while the node runs).
    pub(crate) fn resource_entries(&self) -> Arc<Vec<ResourceEntry>> {
        match self.resources.read() {
            Ok(r) => Arc::clone(&r),
            // A writer panicked mid-replace: the value itself is whole (replaced in one store).
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Replaces the resources whose ids start with `prefix` by `entries` (a source's whole current
    /// list), checked like declared ones against the admitted capabilities; on a refusal the old
    /// list stays. Answers whether anything changed.
    pub fn replace_resources(
        &self,
        prefix: &str,
        entries: Vec<ResourceEntry>,
    ) -> Result<bool, ResourceError> {
        if let Some(e) = entries.iter().find(|e| !e.resource.id.starts_with(prefix)) {
            return Err(ResourceError {
                id: e.resource.id.clone(),
                reason: format!("is not under its source's prefix {prefix}"),
            });
        }
        let mut guard = match self.resources.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let current: Vec<&ResourceEntry> = guard
            .iter()
            .filter(|e| e.resource.id.starts_with(prefix))
            .collect();
        if current.len() == entries.len()
            && current
                .iter()
                .zip(&entries)
                .all(|(a, b)| a.resource == b.resource)
        {
            return Ok(false);
        }
        let next: Vec<ResourceEntry> = guard
            .iter()
            .filter(|e| !e.resource.id.starts_with(prefix))
            .cloned()
            .chain(entries)
            .collect();
        check_resources(&next, |c| self.registry().get(c).is_some())?;
        *guard = Arc::new(next);
        Ok(true)
    }

    /// The resources `caller` may see, for the manifest (spec 9.7), optionally only `kinds`.
    pub(crate) fn manifest_resources(&self, caller: &Caller, kinds: &[String]) -> Vec<Resource> {
        let all = self.resource_entries();
        visible(&all, caller)
            .filter(|e| {
                kinds.is_empty() || e.resource.kind.as_ref().is_some_and(|k| kinds.contains(k))
            })
            .map(|e| e.resource.clone())
            .collect()
    }

    /// `resource_list_request`: the resources `caller` may list, by id, paged with a cursor bound
    /// to the reader and the filters.
    pub async fn read_resources(
        &self,
        caller: &Caller,
        request: &ResourceListRequest,
    ) -> Result<ResourceList, RuntimeError> {
        self.check_tenant(caller, request.tenant_id.as_deref())?;
        if request.kind.as_deref() == Some(crate::channel::CONVERSATION_KIND) {
            return self.conversation_resources(caller, request).await;
        }
        let limit = self.limit(request.limit)?.get();
        let capability = request.capability_id.as_ref().map(|c| c.as_str());
        let kind = request.kind.as_deref();
        let scope = [
            "resources",
            caller.tenant.as_str(),
            caller.id.as_str(),
            capability.unwrap_or("-"),
            kind.unwrap_or("-"),
        ];
        let after = match &request.cursor {
            Some(c) => self.store().decode_stream_cursor(&scope, c)?.1,
            None => 0,
        };
        let all = self.resource_entries();
        let mut entries: Vec<&ResourceEntry> = visible(&all, caller)
            .filter(|e| {
                capability.is_none_or(|c| {
                    e.resource
                        .capability_id
                        .as_ref()
                        .is_some_and(|x| x.as_str() == c)
                }) && kind.is_none_or(|k| e.resource.kind.as_deref() == Some(k))
            })
            .collect();
        entries.sort_by(|a, b| a.resource.id.cmp(&b.resource.id));
        let skip = usize::try_from(after).unwrap_or(usize::MAX);
        let page: Vec<Resource> = entries
            .iter()
            .skip(skip)
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|e| e.resource.clone())
            .collect();
        let next = i64::try_from(skip.saturating_add(page.len())).unwrap_or(i64::MAX);
        Ok(ResourceList {
            resources: page,
            cursor: Some(self.store().stream_cursor(&scope, (0, next))),
        })
    }

    /// `resource_read_request`: the resource with its content; `NotFound` for anything the caller
    /// may not list, exactly as for a missing id.
    pub async fn read_resource(
        self: &std::sync::Arc<Self>,
        caller: &Caller,
        request: &ResourceReadRequest,
    ) -> Result<ResourceReadResult, RuntimeError> {
        self.check_tenant(caller, request.tenant_id.as_deref())?;
        if request
            .resource_id
            .starts_with(aip_core::ConversationId::PREFIX)
        {
            if request.version.is_some()
                || !request.accept.is_empty() && !accepts(&request.accept, "application/json")
            {
                return Err(RuntimeError::InvalidQuery(
                    "a conversation is read as application/json, without `version`",
                ));
            }
            return self
                .read_conversation_resource(caller, &request.resource_id)
                .await;
        }
        let all = self.resource_entries();
        let entry = visible(&all, caller)
            .find(|e| e.resource.id == request.resource_id)
            .ok_or(RuntimeError::NotFound("resource"))?;
        if request.version.is_some() {
            return Err(RuntimeError::InvalidQuery(
                "resource versions are not kept by this runtime: omit `version`",
            ));
        }
        let mime = entry
            .resource
            .mime_type
            .clone()
            .unwrap_or_else(|| "application/octet-stream".into());
        if !request.accept.is_empty() && !accepts(&request.accept, &mime) {
            return Err(RuntimeError::InvalidQuery(
                "the resource is not available in an accepted media type",
            ));
        }
        let content = match &entry.content {
            ResourceContent::Inline(parts) => parts.clone(),
            ResourceContent::File(path) => vec![file_part(path, &mime).await?],
            ResourceContent::Produced(capability) => {
                let id = &entry.resource.id;
                let input = serde_json::json!({ "resource_id": id });
                let text = self.produce_content(caller, capability, input, id).await?;
                vec![MessagePart::Text { text, format: None }]
            }
        };
        let etag = aip_core::canonical::canonical_hash(
            &serde_json::to_value(&content)
                .map_err(|_| RuntimeError::Internal("resource content does not serialize"))?,
        );
        Ok(ResourceReadResult {
            resource: entry.resource.clone(),
            content,
            etag: Some(etag),
            expires_at: entry.resource.expires_at.clone(),
        })
    }
}

impl Runtime {
    /// Whether `resource_id` is declared with produced content (each read runs its capability, so
    /// watching it for changes would run it again and again).
    pub fn resource_is_produced(&self, resource_id: &str) -> bool {
        self.resource_entries().iter().any(|e| {
            e.resource.id == resource_id && matches!(e.content, ResourceContent::Produced(_))
        })
    }

    /// Resource content produced by `capability` for `caller`: a sync native action with `input`,
    /// admitted like any other (scopes, receipts, read model); its output as text (a string as
    /// is, anything else as JSON). A run that does not finish at once or does not complete is
    /// [`RuntimeError::ResourceProduction`], naming `what` was being produced. Shared by declared
    /// produced resources and the MCP profile's resource templates.
    pub async fn produce_content(
        self: &std::sync::Arc<Self>,
        caller: &Caller,
        capability: &aip_core::CapabilityId,
        input: serde_json::Value,
        what: &str,
    ) -> Result<String, RuntimeError> {
        let action = aip_core::Action {
            mode: Some(aip_core::ActionMode::Sync),
            ..aip_core::Action::plain(aip_core::ActionId::generate(), capability.clone(), input)
        };
        let request = crate::admission::ActionRequest::plain(action);
        let result = match self.submit_action(caller, request).await? {
            crate::action::Submitted::Result { result, .. } => result,
            _ => {
                return Err(RuntimeError::ResourceProduction(format!(
                    "the capability producing {what} did not finish at once"
                )));
            }
        };
        if result.status != aip_core::ActionResultStatus::Completed {
            let why = result.error.as_ref().map_or_else(
                || result.status.as_str().to_owned(),
                |e| format!("{}: {}", e.code, e.message),
            );
            return Err(RuntimeError::ResourceProduction(format!(
                "producing {what} failed ({why})"
            )));
        }
        Ok(match result.output {
            Some(serde_json::Value::String(text)) => text,
            Some(other) => other.to_string(),
            None => String::new(),
        })
    }
}

/// Whether an `accept` list admits `mime` (exact, `type/*` or `*/*`).
fn accepts(accept: &[String], mime: &str) -> bool {
    let major = mime.split('/').next().unwrap_or("");
    accept
        .iter()
        .any(|a| a == "*/*" || a == mime || a.strip_suffix("/*").is_some_and(|m| m == major))
}

/// A file's content as one part: UTF-8 text as a text part, anything else base64 in a file part.
async fn file_part(path: &Path, mime: &str) -> Result<MessagePart, RuntimeError> {
    let meta = tokio::fs::metadata(path)
        .await
        .map_err(|_| RuntimeError::NotFound("resource"))?;
    if meta.len() > MAX_RESOURCE_BYTES {
        return Err(RuntimeError::InvalidQuery(
            "the resource's file grew beyond 4 MiB since startup",
        ));
    }
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|_| RuntimeError::NotFound("resource"))?;
    let filename = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let textual = mime.starts_with("text/") || mime == "application/json";
    Ok(match (textual, String::from_utf8(bytes)) {
        (true, Ok(text)) => MessagePart::Text { text, format: None },
        (_, Ok(text)) => binary(text.into_bytes(), mime, filename),
        (_, Err(e)) => binary(e.into_bytes(), mime, filename),
    })
}

fn binary(bytes: Vec<u8>, mime: &str, filename: String) -> MessagePart {
    MessagePart::File {
        url: None,
        size_bytes: Some(bytes.len() as u64),
        data: Some(base64::engine::general_purpose::STANDARD.encode(&bytes)),
        mime_type: mime.to_owned(),
        filename,
    }
}
