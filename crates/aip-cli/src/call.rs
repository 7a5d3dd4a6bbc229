//! `aip call`: invokes a capability on a running server and prints its result. Sync calls print the
//! result; async calls print the ack, or with `--wait` follow the action to its end; streaming calls
//! print chunks as they arrive (a progress bar on a terminal, plain lines when piped) and resume the
//! stream from its last event after a dropped connection.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use crate::client::{Client, Failure, ServerArgs, StreamEnd, print_json, segment, text};

/// Reconnects of one followed stream before giving up.
const MAX_RESUMES: u32 = 10;
/// Longest `wait_ms` the server accepts per status read.
const WAIT_MS: u64 = 25_000;
/// Largest `--input @FILE`.
const MAX_INPUT_BYTES: u64 = 1024 * 1024;

/// `aip call CAPABILITY ...`
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  aip call cap:demo:echo --input '{\"hello\": \"world\"}'
  aip call cap:demo:count --mode streaming --input '{\"n\": 50, \"interval_ms\": 50}'
  aip call cap:demo:transfer --mode async --input @transfer.json --wait")]
pub struct CallArgs {
    /// The capability id (`aip manifest` lists those you may invoke).
    pub capability: String,
    #[command(flatten)]
    pub server: ServerArgs,
    /// The input: JSON text, or @FILE to read it from a file.
    #[arg(long, default_value = "{}")]
    pub input: String,
    /// How to run it.
    #[arg(long, value_enum, default_value = "sync")]
    pub mode: CallMode,
    /// Idempotency key: the same key again returns the first call's outcome.
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// With `--mode async`: follow the action to its final result.
    #[arg(long)]
    pub wait: bool,
    /// The action id (default: a fresh one). Sending the same call again with the same id returns
    /// its outcome instead of running it twice.
    #[arg(long)]
    pub id: Option<String>,
}

/// Execution modes (spec 11.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CallMode {
    /// Answer with the result.
    Sync,
    /// Accept now, run in the background.
    Async,
    /// Stream chunks, then the result.
    Streaming,
}

impl CallMode {
    fn as_str(self) -> &'static str {
        match self {
            CallMode::Sync => "sync",
            CallMode::Async => "async",
            CallMode::Streaming => "streaming",
        }
    }
}

/// Runs `aip call`.
pub fn run(args: CallArgs) -> ExitCode {
    crate::client::run("call", execute(args))
}

pub(crate) fn read_input(input: &str) -> Result<Value, Failure> {
    let text = match input.strip_prefix('@') {
        Some(path) => {
            let size = std::fs::metadata(path)
                .map_err(|e| Failure::Usage(format!("--input {path}: {e}")))?
                .len();
            if size > MAX_INPUT_BYTES {
                return Err(Failure::Usage(format!("--input {path}: larger than 1 MiB")));
            }
            std::fs::read_to_string(path)
                .map_err(|e| Failure::Usage(format!("--input {path}: {e}")))?
        }
        None => input.to_owned(),
    };
    serde_json::from_str(&text).map_err(|e| Failure::Usage(format!("--input is not JSON: {e}")))
}

/// A fresh id with `prefix`.
fn fresh(prefix: &str) -> String {
    aip_core::generate_with_prefix(prefix)
}

async fn execute(args: CallArgs) -> Result<(), Failure> {
    let client = Client::new(&args.server)?;
    let input = read_input(&args.input)?;
    let action_id = args.id.clone().unwrap_or_else(|| fresh("act_"));
    segment(&action_id)?;
    let mut action = json!({
        "id": action_id, "capability_id": args.capability, "mode": args.mode.as_str(), "input": input,
    });
    if let Some(key) = &args.idempotency_key {
        action["idempotency_key"] = json!(key);
    }
    let envelope = json!({
        "aip_version": "1.0",
        "message_type": "aip.core.v1.action",
        "message_id": fresh("msg_"),
        "sent_at": aip_core::Timestamp::now(),
        "body": { "action": action },
    });
    let json_out = args.server.json;
    match args.mode {
        CallMode::Sync => {
            let reply = client.post_envelope("/aip/v1/actions", &envelope).await?;
            finish(&reply["body"]["action_result"], json_out)
        }
        CallMode::Async => {
            let reply = client.post_envelope("/aip/v1/actions", &envelope).await?;
            if let Some(result) = reply["body"].get("action_result") {
                // A re-sent call that already finished.
                return finish(result, json_out);
            }
            if !args.wait {
                if json_out {
                    print_json(&reply);
                } else {
                    let ack = &reply["body"]["ack"];
                    println!("{action_id}: {}", text(&ack["status"]));
                    if let Some(reason) = ack["reason"].as_str() {
                        println!("  {reason}");
                    }
                }
                return Ok(());
            }
            if let Some(approval) = reply["extensions"]["approval"]["approval_id"].as_str() {
                eprintln!("{action_id}: waiting for approval {approval}");
            }
            let result = wait(&client, &action_id).await?;
            finish(&result, json_out)
        }
        CallMode::Streaming => {
            let result = follow(&client, &action_id, Some(&envelope), json_out).await?;
            finish(&result, json_out)
        }
    }
}

/// Prints a final result; a failed or cancelled action is a non-zero exit with its typed code.
fn finish(result: &Value, json_out: bool) -> Result<(), Failure> {
    if result.is_null() {
        return Err(Failure::Usage(
            "the server answered without a result".into(),
        ));
    }
    if json_out {
        print_json(result);
    } else if result["status"] == "completed" {
        match result.get("output") {
            Some(output) => print_json(output),
            None => println!("completed"),
        }
    }
    if result["status"] == "completed" {
        return Ok(());
    }
    let error = &result["error"];
    Err(Failure::Refused {
        status: 200,
        code: error["code"]
            .as_str()
            .unwrap_or_else(|| result["status"].as_str().unwrap_or("failed"))
            .to_owned(),
        message: format!(
            "the action ended {}: {}",
            text(&result["status"]),
            error["message"].as_str().unwrap_or("")
        ),
    })
}

/// Waits (bounded reads of `wait_ms` each) for the action's final result.
async fn wait(client: &Client, action_id: &str) -> Result<Value, Failure> {
    let path = format!("/aip/v1/actions/{action_id}?include_result=true&wait_ms={WAIT_MS}");
    let mut last = String::new();
    loop {
        let view = client.get(&path, &[]).await?;
        let state = text(&view["state"]);
        if state != last && std::io::stderr().is_terminal() {
            eprintln!("{action_id}: {state}");
        }
        if let Some(result) = view.get("result").filter(|r| !r.is_null()) {
            return Ok(result.clone());
        }
        last = state;
    }
}

/// Follows an action's event stream to its result, printing chunks; `submit` opens it by submitting
/// the action, otherwise it is read from the action's events. Resumes after a dropped connection.
pub async fn follow(
    client: &Client,
    action_id: &str,
    submit: Option<&Value>,
    json_out: bool,
) -> Result<Value, Failure> {
    let mut progress = Progress::new(json_out);
    let mut last_id: Option<String> = None;
    let mut resumes = 0;
    let events_path = format!("/aip/v1/actions/{action_id}/events");
    let mut stream = match submit {
        Some(env) => client.stream("/aip/v1/actions", Some(env), None).await?,
        None => client.stream(&events_path, None, None).await?,
    };
    loop {
        let why = match stream.next().await {
            Ok(Some(event)) => {
                if event.id.is_some() {
                    last_id.clone_from(&event.id);
                }
                match event.name.as_str() {
                    "result" => {
                        progress.clear();
                        return Ok(event.data["body"]["action_result"].clone());
                    }
                    "error" => {
                        progress.clear();
                        let error = &event.data["body"]["error"]["error"];
                        return Err(Failure::Refused {
                            status: 200,
                            code: text(&error["code"]),
                            message: text(&error["message"]),
                        });
                    }
                    "chunk" | "done" => progress.chunk(&event.data["body"]["stream_chunk"]),
                    "ack" => {
                        if let Some(approval) =
                            event.data["extensions"]["approval"]["approval_id"].as_str()
                        {
                            eprintln!("{action_id}: waiting for approval {approval}");
                        }
                    }
                    _ => {}
                }
                continue;
            }
            Ok(None) => "the server closed the stream".to_owned(),
            Err(StreamEnd::Dropped(e)) => e,
            Err(StreamEnd::Broken(e)) => return Err(Failure::Usage(e)),
        };
        let mut why = why;
        stream = loop {
            resumes += 1;
            if resumes > MAX_RESUMES {
                return Err(Failure::Usage(format!(
                    "{why}; gave up after {MAX_RESUMES} resumes"
                )));
            }
            progress.clear();
            eprintln!("{action_id}: {why}; resuming");
            tokio::time::sleep(Duration::from_millis(200 * u64::from(resumes))).await;
            match client.stream(&events_path, None, last_id.as_deref()).await {
                Ok(stream) => break stream,
                // A node restarting (unreachable, or draining: 503) is waited for; any other
                // refusal is the answer.
                Err(Failure::Unreachable(e)) => why = format!("server unreachable: {e}"),
                Err(Failure::Refused {
                    status: 503, code, ..
                }) => why = code,
                Err(other) => return Err(other),
            }
        };
    }
}

/// Chunk output: data on stdout (one JSON line each), progress as a bar on a terminal's stderr or
/// as plain lines when piped.
struct Progress {
    json_out: bool,
    bar_shown: bool,
    terminal: bool,
}

impl Progress {
    fn new(json_out: bool) -> Self {
        Self {
            json_out,
            bar_shown: false,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn chunk(&mut self, chunk: &Value) {
        if self.json_out {
            println!("{chunk}");
            return;
        }
        match chunk["kind"].as_str() {
            Some("progress") => self.progress(&chunk["data"]),
            Some("done") => {}
            Some("data") | None => {
                self.clear();
                println!("{}", chunk.get("data").unwrap_or(&Value::Null));
            }
            Some(kind) => {
                self.clear();
                println!("{kind}: {}", chunk.get("data").unwrap_or(&Value::Null));
            }
        }
    }

    fn progress(&mut self, data: &Value) {
        let fraction = match (data["done"].as_f64(), data["total"].as_f64()) {
            (Some(done), Some(total)) if total > 0.0 => Some(done / total),
            _ => data["fraction"].as_f64(),
        };
        match (fraction, self.terminal) {
            (Some(f), true) => {
                let f = f.clamp(0.0, 1.0);
                let filled = (f * 30.0).round() as usize;
                eprint!(
                    "\r[{}{}] {:>3.0}%",
                    "#".repeat(filled),
                    " ".repeat(30 - filled),
                    f * 100.0
                );
                let _ = std::io::stderr().flush();
                self.bar_shown = true;
            }
            _ => eprintln!("progress: {data}"),
        }
    }

    fn clear(&mut self) {
        if self.bar_shown {
            eprint!("\r{}\r", " ".repeat(40));
            self.bar_shown = false;
        }
    }
}
