//! The operator's read commands against a running server: `aip actions list|show|cancel`,
//! `aip events [--follow]`, `aip manifest`, `aip sessions list`. Everything goes through the same
//! read API as every client, so each command shows exactly what the token's principal may read.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use serde_json::{Value, json};

use crate::client::{
    Client, Failure, ServerArgs, StreamEnd, list_query, print_fields, print_json, print_rows,
    segment, text,
};

/// Reconnects of `aip events --follow` in a row before giving up.
const MAX_RESUMES: u32 = 10;

/// `aip actions ...`
#[derive(Debug, Subcommand)]
pub enum ActionsCommand {
    /// List actions you may read, oldest first.
    #[command(after_help = "Example: aip actions list --state running --capability cap:demo:sleep")]
    List {
        #[command(flatten)]
        server: ServerArgs,
        /// Only actions in this state (`queued`, `running`, `pending_approval`, `completed`, ...).
        #[arg(long)]
        state: Option<String>,
        /// Only actions of this capability.
        #[arg(long)]
        capability: Option<String>,
        /// Only actions of this session.
        #[arg(long)]
        session: Option<String>,
        /// At most this many.
        #[arg(long)]
        limit: Option<u32>,
    },
    /// Show one action with its result (and its receipt chain with --receipts).
    #[command(after_help = "Example: aip actions show act_123 --receipts")]
    Show {
        /// Action id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
        /// Include the receipt chain.
        #[arg(long)]
        receipts: bool,
    },
    /// Cancel an action that has not finished (if its capability allows it).
    #[command(after_help = "Example: aip actions cancel act_123 --reason 'wrong input'")]
    Cancel {
        /// Action id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
        /// Why, recorded with the cancellation.
        #[arg(long)]
        reason: Option<String>,
    },
}

/// `aip sessions ...`
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List sessions you may read.
    #[command(after_help = "Example: aip sessions list --status active")]
    List {
        #[command(flatten)]
        server: ServerArgs,
        /// `active`, `closed`, ... or `any`.
        #[arg(long, default_value = "any")]
        status: String,
        /// At most this many.
        #[arg(long)]
        limit: Option<u32>,
    },
}

/// `aip events`
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  aip events                      # your feed, one page
  aip events --follow             # and everything after it, live (resumes after a dropped connection)
  aip events --action act_123 --follow")]
pub struct EventsArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// Only this action's events (its lifecycle, chunks and result).
    #[arg(long)]
    pub action: Option<String>,
    /// Keep following: print events as they happen. An action's stream ends with its result.
    #[arg(long)]
    pub follow: bool,
    /// Only these event kinds (comma-separated, for example `aip.action.completed`).
    #[arg(long)]
    pub kinds: Option<String>,
    /// Continue after this cursor (an event id printed earlier).
    #[arg(long)]
    pub after: Option<String>,
}

/// `aip manifest`
#[derive(Debug, clap::Args)]
#[command(after_help = "Example: aip manifest --json | jq '.capabilities[].id'")]
pub struct ManifestArgs {
    #[command(flatten)]
    pub server: ServerArgs,
}

/// Runs one `aip actions` command.
pub fn actions(command: ActionsCommand) -> ExitCode {
    crate::client::run("actions", run_actions(command))
}

/// Runs `aip sessions`.
pub fn sessions(command: SessionsCommand) -> ExitCode {
    crate::client::run("sessions", run_sessions(command))
}

/// Runs `aip events`.
pub fn events(args: EventsArgs) -> ExitCode {
    crate::client::run("events", run_events(args))
}

/// Runs `aip manifest`.
pub fn manifest(args: ManifestArgs) -> ExitCode {
    crate::client::run("manifest", run_manifest(args))
}

async fn run_actions(command: ActionsCommand) -> Result<(), Failure> {
    match command {
        ActionsCommand::List {
            server,
            state,
            capability,
            session,
            limit,
        } => {
            let client = Client::new(&server)?;
            let query = list_query(
                "any".into(),
                &[
                    ("state", state),
                    ("capability_id", capability),
                    ("session_id", session),
                    ("limit", limit.map(|l| l.to_string())),
                ],
            );
            let list = client.get("/aip/v1/actions", &query).await?;
            if server.json {
                print_json(&list);
                return Ok(());
            }
            let actions = list["actions"].as_array().map_or(&[][..], Vec::as_slice);
            if actions.is_empty() {
                println!("no actions");
                return Ok(());
            }
            let rows: Vec<[String; 5]> = actions
                .iter()
                .map(|a| {
                    [
                        text(&a["action_id"]),
                        text(&a["state"]),
                        text(&a["capability_id"]),
                        text(&a["updated_at"]),
                        text(&a["approval_id"]),
                    ]
                })
                .collect();
            print_rows(
                ["ACTION", "STATE", "CAPABILITY", "UPDATED", "APPROVAL"],
                &rows,
            );
            Ok(())
        }
        ActionsCommand::Show {
            id,
            server,
            receipts,
        } => {
            let client = Client::new(&server)?;
            let mut query = vec![("include_result".to_owned(), "true".to_owned())];
            if receipts {
                query.push(("include_receipts".into(), "true".into()));
            }
            let view = client
                .get(&format!("/aip/v1/actions/{}", segment(&id)?), &query)
                .await?;
            if server.json {
                print_json(&view);
                return Ok(());
            }
            print_fields(&[
                ("action", text(&view["action_id"])),
                ("state", text(&view["state"])),
                ("capability", text(&view["capability_id"])),
                ("session", text(&view["session_id"])),
                ("approval", text(&view["approval_id"])),
                ("started", text(&view["started_at"])),
                ("updated", text(&view["updated_at"])),
                ("result", text(&view["result"]["status"])),
                ("output", text(&view["result"]["output"])),
                ("error", text(&view["result"]["error"]["code"])),
            ]);
            if let Some(chain) = view.get("receipt_chain").filter(|c| !c.is_null()) {
                println!("receipts (root {}):", text(&chain["root_hash"]));
                for r in chain["receipts"].as_array().map_or(&[][..], Vec::as_slice) {
                    println!(
                        "  {}  {}  {}",
                        text(&r["id"]),
                        text(&r["receipt_type"]),
                        text(&r["hash"])
                    );
                }
            }
            Ok(())
        }
        ActionsCommand::Cancel { id, server, reason } => {
            let client = Client::new(&server)?;
            let body = match reason {
                Some(r) => json!({ "reason": r }),
                None => json!({}),
            };
            let reply = client
                .post(&format!("/aip/v1/actions/{}/cancel", segment(&id)?), &body)
                .await?;
            if server.json {
                print_json(&reply);
            } else {
                println!("{id}: cancellation recorded");
            }
            Ok(())
        }
    }
}

async fn run_sessions(command: SessionsCommand) -> Result<(), Failure> {
    let SessionsCommand::List {
        server,
        status,
        limit,
    } = command;
    let client = Client::new(&server)?;
    let query = list_query(status, &[("limit", limit.map(|l| l.to_string()))]);
    let list = client.get("/aip/v1/sessions", &query).await?;
    if server.json {
        print_json(&list);
        return Ok(());
    }
    let sessions = list["sessions"].as_array().map_or(&[][..], Vec::as_slice);
    if sessions.is_empty() {
        println!("no sessions");
        return Ok(());
    }
    let rows: Vec<[String; 4]> = sessions
        .iter()
        .map(|s| {
            [
                text(&s["session_id"]),
                text(&s["status"]),
                text(&s["principal"]["id"]),
                text(&s["expires_at"]),
            ]
        })
        .collect();
    print_rows(["SESSION", "STATUS", "PRINCIPAL", "EXPIRES"], &rows);
    Ok(())
}

async fn run_manifest(args: ManifestArgs) -> Result<(), Failure> {
    let client = Client::new(&args.server)?;
    let manifest = client.get("/aip/v1/manifest", &[]).await?;
    if args.server.json {
        print_json(&manifest);
        return Ok(());
    }
    println!(
        "agent {} ({}); profiles: {}",
        text(&manifest["agent"]["id"]),
        manifest["agent"]["display_name"]
            .as_str()
            .unwrap_or("unnamed"),
        manifest["profiles"]
            .as_array()
            .map(|p| p.iter().map(text).collect::<Vec<_>>().join(", "))
            .unwrap_or_default()
    );
    let capabilities = manifest["capabilities"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let rows: Vec<[String; 5]> = capabilities
        .iter()
        .map(|c| {
            let execution = &c["contract"]["execution"];
            let modes: Vec<&str> = [
                ("sync", "supports_sync"),
                ("async", "supports_async"),
                ("streaming", "supports_streaming"),
            ]
            .iter()
            .filter(|(_, key)| execution[*key] == true)
            .map(|(name, _)| *name)
            .collect();
            [
                text(&c["id"]),
                text(&c["risk"]),
                if modes.is_empty() {
                    "-".into()
                } else {
                    modes.join(",")
                },
                if c["requires_human_approval"] == true {
                    "yes".into()
                } else {
                    "no".into()
                },
                text(&c["name"]),
            ]
        })
        .collect();
    print_rows(["CAPABILITY", "RISK", "MODES", "APPROVAL", "NAME"], &rows);
    Ok(())
}

async fn run_events(args: EventsArgs) -> Result<(), Failure> {
    let client = Client::new(&args.server)?;
    let path = match &args.action {
        Some(id) => format!("/aip/v1/actions/{}/events", segment(id)?),
        None => "/aip/v1/events".to_owned(),
    };
    if !args.follow {
        let query = list_query(
            "any".into(),
            &[
                ("kinds", args.kinds.clone()),
                ("cursor", args.after.clone()),
            ],
        );
        let page = client.get(&path, &query).await?;
        if args.server.json {
            print_json(&page);
        } else {
            for event in page["events"].as_array().map_or(&[][..], Vec::as_slice) {
                print_event(event);
            }
            if let Some(cursor) = page["next_cursor"].as_str().or(page["cursor"].as_str()) {
                println!("next: aip events --after {cursor}");
            }
        }
        return Ok(());
    }
    if args.kinds.is_some() {
        return Err(Failure::Usage(
            "--kinds filters pages; --follow streams every event".into(),
        ));
    }
    let mut last = args.after.clone();
    let mut resumes = 0;
    loop {
        let mut stream = client.stream(&path, None, last.as_deref()).await?;
        loop {
            match stream.next().await {
                Ok(Some(event)) => {
                    resumes = 0;
                    if event.id.is_some() {
                        last.clone_from(&event.id);
                    }
                    if event.name == "heartbeat" {
                        continue;
                    }
                    if args.server.json {
                        println!(
                            "{}",
                            json!({ "event": event.name, "id": event.id, "data": event.data })
                        );
                    } else {
                        print_stream_event(&event.name, &event.data);
                    }
                    match event.name.as_str() {
                        "result" => return Ok(()),
                        "error" => {
                            let error = &event.data["body"]["error"]["error"];
                            return Err(Failure::Refused {
                                status: 200,
                                code: text(&error["code"]),
                                message: text(&error["message"]),
                            });
                        }
                        _ => {}
                    }
                }
                Ok(None) => {
                    eprintln!("aip events: the server closed the stream; resuming");
                    break;
                }
                Err(StreamEnd::Dropped(e)) => {
                    eprintln!("aip events: {e}; resuming");
                    break;
                }
                Err(StreamEnd::Broken(e)) => return Err(Failure::Usage(e)),
            }
        }
        resumes += 1;
        if resumes > MAX_RESUMES {
            return Err(Failure::Usage(format!(
                "gave up after {MAX_RESUMES} resumes in a row"
            )));
        }
        tokio::time::sleep(Duration::from_millis(200 * u64::from(resumes))).await;
    }
}

fn print_event(event: &Value) {
    println!(
        "{}  {}  {}  {}",
        text(&event["occurred_at"]),
        text(&event["kind"]),
        text(&event["action_id"]),
        event.get("data").map_or(String::new(), Value::to_string)
    );
}

/// One streamed event as a line: feed pages event by event, chunks and results by kind.
fn print_stream_event(name: &str, envelope: &Value) {
    let body = &envelope["body"];
    match name {
        "message" => {
            for event in body["event_stream"]["events"]
                .as_array()
                .map_or(&[][..], Vec::as_slice)
            {
                print_event(event);
            }
        }
        "chunk" | "done" => {
            let chunk = &body["stream_chunk"];
            println!(
                "chunk {} {} {}",
                text(&chunk["sequence"]),
                text(&chunk["kind"]),
                chunk.get("data").map_or(String::new(), Value::to_string)
            );
        }
        "ack" => println!("ack {}", text(&body["ack"]["status"])),
        "result" => {
            let result = &body["action_result"];
            println!(
                "result {} {}",
                text(&result["status"]),
                result.get("output").map_or(String::new(), Value::to_string)
            );
        }
        other => println!("{other} {body}"),
    }
}
