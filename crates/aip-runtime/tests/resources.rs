//! Resources (spec 9.7, 9.8) through the runtime's binding-independent entry point: who may learn
//! that a resource exists, lists with filters and reader-bound cursors, reads of inline and file
//! content (binary as base64), expiry, and the manifest's resources with the kind filter.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::sync::Arc;

use aip_core::{MessagePart, Resource};
use aip_runtime::resource::{ResourceContent, ResourceEntry, check_resources};
use aip_runtime::{Caller, Registry, Runtime};
use serde_json::{Value, json};
use support::{code, envelope, send};

fn resource(value: Value) -> Resource {
    serde_json::from_value(value).unwrap()
}

fn inline(value: Value, text: &str) -> ResourceEntry {
    ResourceEntry {
        resource: resource(value),
        content: ResourceContent::Inline(vec![MessagePart::Text {
            text: text.into(),
            format: None,
        }]),
    }
}

async fn node(dir: &Path) -> Arc<Runtime> {
    let store: Arc<dyn aip_store::Store> = Arc::new(
        aip_store::SqliteStore::open(dir.join("r.sqlite"))
            .await
            .unwrap(),
    );
    let root = dir.join("files");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("guide.md"), "# Guide\nhello").unwrap();
    std::fs::write(root.join("logo.bin"), [0u8, 159, 146, 150, 255]).unwrap();
    let mut config = support::runtime_config(1, 30_000);
    config.resources = vec![
        inline(json!({ "id": "res:public", "name": "Public notes", "kind": "doc", "tenant_id": "t", "access": { "public": true } }), "for everyone in t"),
        inline(json!({ "id": "res:alice", "name": "Alice only", "kind": "doc", "tenant_id": "t", "access": { "allowed_principals": ["alice"] } }), "alice's"),
        inline(json!({ "id": "res:ops", "name": "Ops runbook", "kind": "runbook", "tenant_id": "t", "access": { "required_scopes": ["ops:read"] } }), "runbook"),
        inline(json!({ "id": "res:nopolicy", "name": "Admins only", "tenant_id": "t" }), "secret"),
        inline(json!({ "id": "res:other", "name": "Other tenant", "tenant_id": "u", "access": { "public": true } }), "u's"),
        inline(json!({ "id": "res:untenanted", "name": "Default tenant's", "access": { "public": true } }), "default's"),
        inline(json!({ "id": "res:expired", "name": "Gone", "tenant_id": "t", "access": { "public": true }, "expires_at": "2020-01-01T00:00:00Z" }), "old"),
        inline(json!({ "id": "res:echo", "name": "Echo notes", "capability_id": "cap:demo:echo", "tenant_id": "t", "access": { "public": true } }), "echo's"),
        ResourceEntry::file(resource(json!({ "id": "res:guide", "name": "Guide", "kind": "doc", "mime_type": "text/markdown", "tenant_id": "t", "access": { "public": true } })), &root, Path::new("guide.md")).unwrap(),
        ResourceEntry::file(resource(json!({ "id": "res:logo", "name": "Logo", "kind": "image", "mime_type": "image/png", "tenant_id": "t", "access": { "public": true } })), &root, Path::new("logo.bin")).unwrap(),
    ];
    let registry = Registry::admit(aip_runtime::handler::demo::demo_capabilities(Arc::clone(
        &store,
    )))
    .unwrap();
    check_resources(&config.resources, |id| registry.get(id).is_some()).unwrap();
    Runtime::new(store, registry, config)
}

fn alice() -> Caller {
    support::caller("alice", "t", &["invoke:cap:demo:echo"])
}

fn bob() -> Caller {
    support::caller("bob", "t", &["ops:read"])
}

fn admin() -> Caller {
    support::caller("root", "t", &["*"])
}

async fn ids(runtime: &Arc<Runtime>, caller: &Caller, body: Value) -> Vec<String> {
    let (status, reply) = send(
        runtime,
        caller,
        &envelope(
            "aip.resource.v1.resource_list_request",
            json!({ "resource_list_request": body }),
        ),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    reply["body"]["resource_list"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn read(runtime: &Arc<Runtime>, caller: &Caller, body: Value) -> (u16, Value) {
    send(
        runtime,
        caller,
        &envelope(
            "aip.resource.v1.resource_read_request",
            json!({ "resource_read_request": body }),
        ),
    )
    .await
}

#[tokio::test]
async fn a_star_scope_never_widens_a_principal_list_nor_crosses_a_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(dir.path()).await;
    // `*` in the resource's own tenant: not alice, so not alice's resource, listed or read.
    assert!(
        !ids(&runtime, &admin(), json!({}))
            .await
            .contains(&"res:alice".to_owned())
    );
    let (status, reply) = read(&runtime, &admin(), json!({ "resource_id": "res:alice" })).await;
    assert_eq!(
        (status, code(&reply)),
        (404, "aip.core.not_found"),
        "{reply}"
    );
    // `*` in another tenant sees only that tenant's resources.
    let foreign_root = support::caller("root", "u", &["*"]);
    assert_eq!(ids(&runtime, &foreign_root, json!({})).await, ["res:other"]);
    for id in ["res:alice", "res:public", "res:nopolicy", "res:untenanted"] {
        let (status, reply) = read(&runtime, &foreign_root, json!({ "resource_id": id })).await;
        assert_eq!(
            (status, code(&reply)),
            (404, "aip.core.not_found"),
            "{id}: {reply}"
        );
    }
    // A resource declared without a tenant is the default tenant's, and only its.
    let default_reader = support::caller("dora", "default", &[]);
    assert_eq!(
        ids(&runtime, &default_reader, json!({})).await,
        ["res:untenanted"]
    );
    let (status, reply) = read(
        &runtime,
        &default_reader,
        json!({ "resource_id": "res:untenanted" }),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
}

#[tokio::test]
async fn a_principal_sees_only_the_resources_its_policy_allows_and_nothing_of_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(dir.path()).await;
    assert_eq!(
        ids(&runtime, &alice(), json!({})).await,
        [
            "res:alice",
            "res:echo",
            "res:guide",
            "res:logo",
            "res:public"
        ]
    );
    assert_eq!(
        ids(&runtime, &bob(), json!({})).await,
        ["res:guide", "res:logo", "res:ops", "res:public"]
    );
    assert_eq!(
        ids(&runtime, &admin(), json!({})).await,
        [
            "res:echo",
            "res:guide",
            "res:logo",
            "res:nopolicy",
            "res:ops",
            "res:public"
        ]
    );
    // Another tenant's public resource is another tenant's.
    let stranger = support::caller("carol", "u", &[]);
    assert_eq!(ids(&runtime, &stranger, json!({})).await, ["res:other"]);
    // A hidden resource reads exactly like a missing one.
    let (status, hidden) = read(&runtime, &bob(), json!({ "resource_id": "res:alice" })).await;
    let (_, missing) = read(&runtime, &bob(), json!({ "resource_id": "res:nothing" })).await;
    assert_eq!((status, code(&hidden)), (404, "aip.core.not_found"));
    assert_eq!(hidden["body"], missing["body"]);
    for gone in ["res:expired", "res:other", "res:nopolicy"] {
        let (status, _) = read(&runtime, &alice(), json!({ "resource_id": gone })).await;
        assert_eq!(status, 404, "{gone}");
    }
    // The manifest lists the same, and filters them by kind.
    let manifest = serde_json::to_value(runtime.manifest(&alice(), None, &[])).unwrap();
    assert_eq!(manifest["resources"].as_array().unwrap().len(), 5);
    let filter: aip_core::ManifestFilter =
        serde_json::from_value(json!({ "resource_kinds": ["image"] })).unwrap();
    let images = serde_json::to_value(runtime.manifest(&alice(), Some(&filter), &[])).unwrap();
    let kinds: Vec<&str> = images["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["res:logo"]);
}

#[tokio::test]
async fn lists_filter_by_kind_and_capability_and_page_with_cursors_bound_to_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(dir.path()).await;
    assert_eq!(
        ids(&runtime, &alice(), json!({ "kind": "doc" })).await,
        ["res:alice", "res:guide", "res:public"]
    );
    assert_eq!(
        ids(
            &runtime,
            &alice(),
            json!({ "capability_id": "cap:demo:echo" })
        )
        .await,
        ["res:echo"]
    );
    let list = |body: Value, caller: Caller| {
        let runtime = Arc::clone(&runtime);
        async move {
            send(
                &runtime,
                &caller,
                &envelope(
                    "aip.resource.v1.resource_list_request",
                    json!({ "resource_list_request": body }),
                ),
            )
            .await
        }
    };
    let (_, first) = list(json!({ "limit": 2 }), alice()).await;
    let page: Vec<&str> = first["body"]["resource_list"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(page, ["res:alice", "res:echo"]);
    let cursor = first["body"]["resource_list"]["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        ids(&runtime, &alice(), json!({ "cursor": cursor })).await,
        ["res:guide", "res:logo", "res:public"]
    );
    // Another reader (or another filter) cannot use it.
    let (status, reply) = list(json!({ "cursor": cursor }), bob()).await;
    assert_eq!(
        (status / 100, code(&reply)),
        (4, "aip.read.invalid_cursor"),
        "{reply}"
    );
    let (status, _) = list(json!({ "cursor": cursor, "kind": "doc" }), alice()).await;
    assert_eq!(status / 100, 4);
    let (status, reply) = list(json!({ "tenant_id": "u" }), alice()).await;
    assert_eq!(status / 100, 4, "{reply}");
}

#[tokio::test]
async fn reads_return_inline_text_file_text_and_binary_as_base64_within_their_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = node(dir.path()).await;
    let (status, reply) = read(&runtime, &alice(), json!({ "resource_id": "res:public" })).await;
    assert_eq!(status, 200, "{reply}");
    let result = &reply["body"]["resource_read_result"];
    assert_eq!(
        result["content"],
        json!([{ "type": "text", "text": "for everyone in t" }])
    );
    assert_eq!(result["etag"].as_str().unwrap().len(), 64);
    let (_, reply) = read(
        &runtime,
        &alice(),
        json!({ "resource_id": "res:guide", "accept": ["text/*"] }),
    )
    .await;
    assert_eq!(
        reply["body"]["resource_read_result"]["content"][0]["text"],
        "# Guide\nhello"
    );
    let (_, reply) = read(&runtime, &alice(), json!({ "resource_id": "res:logo" })).await;
    let part = &reply["body"]["resource_read_result"]["content"][0];
    assert_eq!(
        (
            part["type"].as_str(),
            part["data"].as_str(),
            part["size_bytes"].as_u64()
        ),
        (Some("file"), Some("AJ+Slv8="), Some(5))
    );
    // What cannot be served is refused, not approximated.
    let (status, reply) = read(
        &runtime,
        &alice(),
        json!({ "resource_id": "res:logo", "accept": ["text/plain"] }),
    )
    .await;
    assert_eq!(
        (status / 100, code(&reply)),
        (4, "aip.read.invalid_query"),
        "{reply}"
    );
    let (status, _) = read(
        &runtime,
        &alice(),
        json!({ "resource_id": "res:guide", "version": "v2" }),
    )
    .await;
    assert_eq!(status / 100, 4);
}

#[test]
fn file_resources_outside_their_root_or_too_large_are_refused_at_declaration() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(dir.path().join("secret.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("link.txt")).unwrap();
    std::fs::write(root.join("big.bin"), vec![0u8; 4 * 1024 * 1024 + 1]).unwrap();
    let r = || resource(json!({ "id": "res:f", "name": "f" }));
    for bad in ["../secret.txt", "link.txt", "big.bin", "missing.txt"] {
        assert!(
            ResourceEntry::file(r(), &root, Path::new(bad)).is_err(),
            "{bad}"
        );
    }
    assert!(ResourceEntry::file(r(), &root, &dir.path().join("secret.txt")).is_err());
    // Duplicates and unknown owning capabilities stop the declaration too.
    let twice = vec![
        inline(json!({ "id": "res:a", "name": "a" }), "1"),
        inline(json!({ "id": "res:a", "name": "b" }), "2"),
    ];
    assert!(check_resources(&twice, |_| true).is_err());
    let orphan = vec![inline(
        json!({ "id": "res:b", "name": "b", "capability_id": "cap:nope" }),
        "x",
    )];
    assert!(check_resources(&orphan, |_| false).is_err());
}
