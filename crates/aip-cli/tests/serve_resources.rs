//! Resources through the binary (spec 9.7): declared in the config file (inline text and a file
//! under `resource_root`), listed and read over REST and the envelope endpoint, hidden from who may
//! not list them, and a declaration that escapes its root stops startup.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::{Value, json};
use support::{Server, envelope, token_file};

#[tokio::test]
async fn declared_resources_are_listed_and_read_only_by_principals_their_policy_allows() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("guide.md"), "# Guide").unwrap();
    let reader = "reader-token-0123456789abcdef";
    let reader_file = token_file(dir.path(), "reader.token", reader);
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        format!(
            r#"resource_root = "{root}"

[[principals]]
id = "reader"
kind = "service"
tenant = "default"
scopes = ["docs:read"]
token_file = "{token}"

[[resources]]
id = "res:guide"
name = "Guide"
kind = "doc"
mime_type = "text/markdown"
tenant_id = "default"
access = {{ required_scopes = ["docs:read"] }}
file = "guide.md"

[[resources]]
id = "res:admin-notes"
name = "Admin notes"
tenant_id = "default"
text = "only for admins"
"#,
            root = root.display(),
            token = reader_file.display()
        ),
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let admin = server.admin();
    let reader = server.client(reader);

    let ids = |list: &Value| -> Vec<String> {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, list) = admin.get("/aip/v1/resources").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(ids(&list), ["res:admin-notes", "res:guide"]);
    let (_, list) = reader.get("/aip/v1/resources").await;
    assert_eq!(ids(&list), ["res:guide"]);
    let (status, read) = reader
        .get("/aip/v1/resources/res:guide?accept=text/*")
        .await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["content"][0]["text"], "# Guide");
    let (status, hidden) = reader.get("/aip/v1/resources/res:admin-notes").await;
    let (_, missing) = reader.get("/aip/v1/resources/res:none").await;
    assert_eq!(status, 404);
    assert_eq!(hidden, missing);
    // The envelope endpoint answers the same.
    let env = envelope(
        "aip.resource.v1.resource_read_request",
        json!({ "resource_read_request": { "resource_id": "res:guide" } }),
    );
    let (status, reply) = reader.post("/aip/v1/messages", &env).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["body"]["resource_read_result"]["content"][0]["text"],
        "# Guide"
    );
    // The manifest names them for who may see them.
    let (_, manifest) = reader.get("/aip/v1/manifest").await;
    assert_eq!(manifest["resources"].as_array().unwrap().len(), 1);
}

#[test]
fn a_file_resource_outside_its_root_stops_startup_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("files");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(dir.path().join("secret.txt"), "x").unwrap();
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        format!(
            "resource_root = \"{}\"\n\n[[resources]]\nid = \"res:escape\"\nname = \"Escape\"\nfile = \"../secret.txt\"\n",
            root.display()
        ),
    )
    .unwrap();
    let err = support::serve_refused(&dir.path().join("data"), &config);
    assert!(
        err.contains("res:escape") && err.contains("outside the resource root"),
        "{err}"
    );
}

#[tokio::test]
async fn a_produced_resource_runs_its_read_only_capability_as_the_reader_and_a_writer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (caller, outsider) = (
        "caller-token-0123456789abcdef",
        "outsider-token-0123456789abcd",
    );
    let caller_file = token_file(dir.path(), "caller.token", caller);
    let outsider_file = token_file(dir.path(), "outsider.token", outsider);
    let config = dir.path().join("aip.toml");
    let text = |produced_by: &str| {
        format!(
            r#"
[[principals]]
id = "caller"
tenant = "default"
scopes = ["docs:read", "invoke:cap:demo:echo"]
token_file = "{caller}"

[[principals]]
id = "outsider"
tenant = "default"
scopes = ["docs:read"]
token_file = "{outsider}"

[[resources]]
id = "res:live"
name = "Live status"
mime_type = "application/json"
tenant_id = "default"
access = {{ required_scopes = ["docs:read"] }}
produced_by = "{produced_by}"
"#,
            caller = caller_file.display(),
            outsider = outsider_file.display()
        )
    };
    std::fs::write(&config, text("cap:demo:echo")).unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let (status, read) = server
        .client(caller)
        .get("/aip/v1/resources/res:live")
        .await;
    assert_eq!(status, 200, "{read}");
    let content: Value =
        serde_json::from_str(read["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(content, json!({ "resource_id": "res:live" }));
    // The read was the caller's native action of the producing capability.
    let (_, actions) = server
        .client(caller)
        .get("/aip/v1/actions?capability_id=cap:demo:echo")
        .await;
    assert_eq!(actions["actions"].as_array().unwrap().len(), 1, "{actions}");
    // Who may not invoke the producer sees no such resource.
    let (status, _) = server
        .client(outsider)
        .get("/aip/v1/resources/res:live")
        .await;
    assert_eq!(status, 404);
    let (_, listed) = server.client(outsider).get("/aip/v1/resources").await;
    assert_eq!(listed["resources"], json!([]));
    drop(server);
    // A capability that writes cannot produce a resource: startup stops, naming it.
    std::fs::write(&config, text("cap:demo:book")).unwrap();
    let err = support::serve_refused(&dir.path().join("data2"), &config);
    assert!(
        err.contains("res:live") && err.contains("read side effects"),
        "{err}"
    );
}
