//! `aip conformance statement`: the conformance statement of spec 24.1 for this build and a
//! configuration. A class is claimed only when this implementation implements it, and each claimed
//! class names the tests that prove it; `tests/conformance_statement.rs` fails if a claimed class
//! names no test or a test that does not exist. CI runs every named test, so a published claim is
//! backed by a green run of the revision it names.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Value, json};

pub mod report;

/// The build's source revision (`git rev-parse --short HEAD` at build time, else `unknown`).
pub const REVISION: &str = env!("AIP_BUILD_REVISION");

/// One conformance class of spec 24.2 and this implementation's stand on it.
pub struct Class {
    /// The class name as in the spec's table.
    pub name: &'static str,
    /// Whether this build claims it.
    pub claimed: bool,
    /// Tests proving it, as `<crate>::<test binary>::<test fn>`; for unclaimed classes, why not.
    pub evidence: &'static [&'static str],
}

/// The classes of spec 24.2.
pub const CLASSES: &[Class] = &[
    Class {
        name: "Core producer",
        claimed: true,
        evidence: &[
            "aip-core::decode::envelopes_built_in_code_carry_a_fresh_id_time_and_matching_type",
            "aip-core::decode::the_registry_has_58_types_with_distinct_strings_and_body_keys",
            "aip-cli::serve_parity::every_envelope_the_node_sends_over_http_sse_websocket_and_nats_validates_against_the_normative_schema",
        ],
    },
    Class {
        name: "Core consumer",
        claimed: true,
        evidence: &[
            "aip-core::decode::an_unsupported_version_is_rejected_first",
            "aip-core::decode::oversized_and_malformed_input_is_rejected_with_typed_errors",
            "aip-core::decode::schema_failures_carry_the_pointer_of_the_offending_member",
        ],
    },
    Class {
        name: "Discovery provider",
        claimed: true,
        evidence: &[
            "aip-runtime::admission::every_demo_capability_is_admitted_and_visible_to_the_admin",
            "aip-runtime::admission::a_contract_promising_streaming_or_cancellation_the_handler_lacks_is_refused",
            "aip-runtime::contexts::capabilities_are_advertised_with_exactly_the_contracts_the_runtime_honours",
            "aip-runtime::resources::a_principal_sees_only_the_resources_its_policy_allows_and_nothing_of_the_rest",
        ],
    },
    Class {
        name: "Action runtime",
        claimed: true,
        evidence: &[
            "aip-runtime::resend::an_identical_resend_returns_the_original_outcome_for_every_collision_behaviour_before_and_after_a_restart",
            "aip-cli::serve_crash::work_admitted_before_a_kill_9_finishes_after_restart_without_duplicate_bookings",
            "aip-store::store_suite::sqlite::many_concurrent_admissions_on_one_key_yield_exactly_one_owner",
        ],
    },
    Class {
        name: "Streaming runtime",
        claimed: true,
        evidence: &[
            "aip-cli::serve_stream::the_global_event_stream_carries_every_event_with_a_resumable_id_and_heartbeats",
            "aip-cli::serve_client_cli::a_followed_stream_cut_mid_way_resumes_and_prints_every_chunk_once",
        ],
    },
    Class {
        name: "Operational read model",
        claimed: true,
        evidence: &[
            "aip-cli::serve_parity::every_read_answers_the_same_over_rest_the_http_envelope_websocket_and_nats",
            "aip-runtime::audit_export::an_export_needs_its_own_scope_carries_the_receipts_and_is_itself_audited",
        ],
    },
    Class {
        name: "Approval runtime",
        claimed: true,
        evidence: &[
            "aip-runtime::approvals::a_decision_claiming_another_approver_is_refused_as_spoofing",
            "aip-runtime::approvals::a_large_transfer_needs_two_distinct_approvers_and_the_same_one_twice_counts_once",
            "aip-runtime::approvals::a_substituted_governed_input_is_refused_at_decision_and_before_dispatch",
            "aip-cli::serve_approvals::a_kill_9_between_the_grant_and_the_dispatch_resumes_the_transfer_once_after_restart",
            "aip-cli::serve_approvals::two_postgres_nodes_racing_the_decisions_and_the_resume_dispatch_each_transfer_once",
        ],
    },
    Class {
        name: "Transaction runtime",
        claimed: true,
        evidence: &[
            "aip-runtime::transactions::a_commit_that_no_longer_matches_its_plan_is_refused_and_pays_nothing",
            "aip-runtime::transactions::concurrent_commits_of_one_plan_pay_exactly_once",
            "aip-runtime::transactions::an_uncertain_commit_is_never_retried_even_after_a_restart_and_reconciles_to_committed",
            "aip-runtime::transactions::a_commit_reconciled_as_not_committed_may_be_committed_again_and_pays_once",
            "aip-runtime::transactions::a_compensation_is_a_governed_action_with_its_own_idempotency_result_and_receipts",
            "aip-cli::serve_transactions::a_worker_stopped_past_its_lease_cannot_pay_and_its_commit_is_settled_unknown_by_another_node",
        ],
    },
    Class {
        name: "Delegation runtime",
        claimed: true,
        evidence: &[
            "aip-cli::serve_delegation::a_capability_delegated_to_a_peer_completes_from_its_signed_result_and_both_views_show_the_graph",
            "aip-cli::serve_delegation::a_wrong_key_a_narrow_scope_a_loop_and_an_overlong_chain_are_each_refused",
            "aip-cli::serve_delegation::a_cancelled_or_expired_parent_stops_its_child_and_an_expired_one_is_uncertain",
            "aip-runtime::delegation::refused_chains_and_requests_name_their_error_and_admit_nothing",
        ],
    },
    Class {
        name: "Callback runtime",
        claimed: true,
        evidence: &[
            "aip-runtime::callbacks::every_ssrf_probe_and_malformed_callback_is_refused_at_admission_and_nothing_is_admitted",
            "aip-runtime::callbacks::a_receiver_that_fails_twice_gets_one_signed_delivery_retried_under_one_delivery_id",
            "aip-runtime::callbacks::a_target_that_keeps_failing_is_dead_lettered_and_an_operator_redrives_it_under_its_id",
            "aip-runtime::callbacks::a_redirect_is_not_followed_by_default_and_a_followed_hop_to_a_denied_address_is_refused",
        ],
    },
    Class {
        name: "Native HTTP binding",
        claimed: true,
        evidence: &[
            "aip-cli::serve_e2e::a_sync_echo_returns_its_input_with_a_verifiable_receipt_chain",
            "aip-server::http::tests::any_origin_outside_the_list_or_the_servers_own_is_refused",
        ],
    },
    Class {
        name: "Native NATS binding",
        claimed: true,
        evidence: &[
            "aip-cli::serve_nats::an_action_over_nats_request_reply_returns_its_result_with_the_standard_headers",
            "aip-cli::serve_nats::two_nodes_in_one_queue_group_share_the_requests",
        ],
    },
    Class {
        name: "MCP compatibility",
        claimed: false,
        evidence: &[
            "not claimed: /mcp serves tools, resources and prompts over Streamable HTTP and legacy HTTP+SSE with the facade tools, tasks, progress and OAuth and upstream servers as capabilities (test binaries serve_mcp, serve_mcp_tools, serve_mcp_sdk, serve_mcp_oauth, serve_mcp_upstream); the official MCP conformance suite runs every server scenario in serve_mcp_sdk, its expected failures listed with their reasons in tests/interop/mcp-conformance-baseline.yml (a scenario that starts passing fails the run until it is removed there)",
        ],
    },
    Class {
        name: "Connector",
        claimed: false,
        evidence: &["no frozen SDK connector suite run"],
    },
];

/// `aip conformance ...`
#[derive(Debug, clap::Subcommand)]
pub enum ConformanceCommand {
    /// Print the conformance statement (spec 24.1) for this build and a configuration.
    #[command(
        after_help = "Examples:\n  aip conformance statement\n  aip conformance statement --config aip.toml --json"
    )]
    Statement {
        /// The configuration whose profiles and limits the statement describes.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// JSON instead of Markdown.
        #[arg(long)]
        json: bool,
    },
    /// Check the statement against a test run's JUnit report: a claimed class stands only when
    /// every test it names ran and passed there (not skipped, not absent).
    #[command(
        after_help = "Examples:\n  cargo nextest run --workspace && aip conformance report --check\n  aip conformance report --junit target/nextest/default/junit.xml --json"
    )]
    Report {
        /// The JUnit report of the run (`cargo nextest run` writes it, `.config/nextest.toml`).
        #[arg(
            long,
            value_name = "FILE",
            default_value = "target/nextest/default/junit.xml"
        )]
        junit: PathBuf,
        /// The configuration whose statement is checked.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// JSON instead of Markdown.
        #[arg(long)]
        json: bool,
        /// Exit 1 when a claimed class does not stand.
        #[arg(long)]
        check: bool,
    },
}

/// Runs `aip conformance`.
pub fn run(command: ConformanceCommand) -> ExitCode {
    let (config, json, junit, check) = match command {
        ConformanceCommand::Statement { config, json } => (config, json, None, false),
        ConformanceCommand::Report {
            junit,
            config,
            json,
            check,
        } => (config, json, Some(junit), check),
    };
    let config = match aip_server::config::Config::load(config.as_deref()) {
        Ok(c) => c,
        Err(err) => {
            eprintln!("aip conformance: {err}");
            return ExitCode::from(2);
        }
    };
    let statement = statement(&config);
    if let Some(junit) = junit {
        let run = match report::Run::read(&junit) {
            Ok(run) => run,
            Err(err) => {
                eprintln!("aip conformance report: {err}");
                return ExitCode::from(2);
            }
        };
        let r = report::report(&statement, &run, &junit.display().to_string());
        if json {
            match serde_json::to_string_pretty(&r) {
                Ok(text) => println!("{text}"),
                Err(_) => return ExitCode::FAILURE,
            }
        } else {
            print!("{}", report::markdown(&r));
        }
        if check && r["every_claim_stands"] != true {
            eprintln!(
                "aip conformance report: a claimed class is not backed by passing tests in {}",
                junit.display()
            );
            return ExitCode::FAILURE;
        }
        return ExitCode::SUCCESS;
    }
    if json {
        match serde_json::to_string_pretty(&statement) {
            Ok(text) => println!("{text}"),
            Err(_) => return ExitCode::FAILURE,
        }
    } else {
        print!("{}", markdown(&statement));
    }
    ExitCode::SUCCESS
}

/// The statement as data.
pub fn statement(config: &aip_server::config::Config) -> Value {
    let schemas: Vec<Value> = aip_schema::generate_all()
        .into_iter()
        .map(|(name, schema)| json!([name, schema]))
        .collect();
    let served: Vec<&str> = aip_runtime::SERVED.iter().map(|t| t.as_str()).collect();
    let unsupported: Vec<&str> = aip_core::MessageType::ALL
        .iter()
        .map(|t| t.as_str())
        .filter(|t| !served.contains(t) && !is_reply_type(t))
        .collect();
    let l = &config.limits;
    json!({
        "implementation": { "name": "aip", "version": env!("CARGO_PKG_VERSION"), "protocol": "AIP 1.0" },
        "classes": CLASSES.iter().map(|c| {
            // The NATS binding is claimed for configurations that enable it.
            let nats_off = c.name == "Native NATS binding" && config.nats.url.is_none();
            let mut evidence: Vec<&str> = c.evidence.to_vec();
            if nats_off {
                evidence.insert(0, "implemented, not enabled by this configuration (start with --nats URL)");
            }
            json!({ "class": c.name, "claimed": c.claimed && !nats_off, "evidence": evidence })
        }).collect::<Vec<_>>(),
        "profiles": aip_server::app::profiles(config).iter().map(|p| p.as_str().to_owned()).collect::<Vec<_>>(),
        "transports": transports(config),
        "schemas": { "files": schemas.len(), "digest": aip_core::canonical::canonical_hash(&Value::Array(schemas)) },
        "limits": {
            "max_body_bytes": l.max_body_bytes,
            "max_list_limit": l.max_list_limit,
            "max_wait_ms": l.max_wait_ms,
            "max_action_timeout_ms": l.max_action_timeout_ms,
            "stream_buffer_events": l.stream_buffer_events,
            "ws_max_streams": l.ws_max_streams,
            "max_clock_skew_ms": config.security.max_clock_skew_ms,
            "max_envelope_depth": aip_core::Limits::default().max_depth,
        },
        "answer_message_types": ANSWERS,
        "unsupported_message_types": unsupported,
        "unsupported_message_code": aip_core::ErrorCode::UnsupportedMessage.as_str(),
        "test_suite": { "revision": REVISION, "command": "bash .ci/run (scripts/test)" },
    })
}

/// The answers this runtime sends for the types it serves: not "unsupported", they are never
/// requests to it.
const ANSWERS: &[&str] = &[
    "aip.core.v1.handshake_response",
    "aip.core.v1.ack",
    "aip.core.v1.stream_chunk",
    "aip.core.v1.action_result",
    "aip.core.v1.error",
    "aip.core.v1.heartbeat_ack",
    "aip.lifecycle.v1.action_status",
    "aip.lifecycle.v1.action_list",
    "aip.lifecycle.v1.action_events",
    "aip.policy.v1.approval_record_view",
    "aip.policy.v1.approval_list",
    "aip.session.v1.session_view",
    "aip.session.v1.session_list",
    "aip.session.v1.session_resume",
    "aip.discovery.v1.manifest_response",
    "aip.discovery.v1.event_stream_response",
    "aip.audit.v1.receipt_chain",
    "aip.audit.v1.audit_query_result",
    "aip.resource.v1.resource_list",
    "aip.resource.v1.resource_read_result",
    "aip.transaction.v1.result",
    "aip.transaction.v1.view",
    "aip.callback.v1.delivery_record",
    "aip.callback.v1.delivery_list",
    "aip.agent.v1.delegation_result",
];

fn is_reply_type(t: &str) -> bool {
    ANSWERS.contains(&t)
}

fn transports(config: &aip_server::config::Config) -> Vec<&'static str> {
    let mut t = vec!["http", "sse", "websocket"];
    if config.nats.url.is_some() {
        t.push("nats");
    }
    t
}

/// The statement as the Markdown of `docs/conformance.md`.
pub fn markdown(s: &Value) -> String {
    let mut out = String::new();
    let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    out.push_str("# AIP 1.0 conformance statement\n\n");
    out.push_str(&format!(
        "Implementation: {} {} ({}). Test-suite revision: `{}` ({}).\n\n",
        text(&s["implementation"]["name"]),
        text(&s["implementation"]["version"]),
        text(&s["implementation"]["protocol"]),
        text(&s["test_suite"]["revision"]),
        text(&s["test_suite"]["command"]),
    ));
    out.push_str(
        "Each claim names its tests. `scripts/test` checks the statement against the JUnit report of \
         its own run (`aip conformance report --check`, written to `target/conformance-report.md`): \
         a claimed class with a test that failed, skipped for a missing service, or did not run \
         fails the run.\n\n",
    );
    out.push_str("## Classes (spec 24.2)\n\n| class | claimed | evidence |\n|---|---|---|\n");
    for c in s["classes"].as_array().into_iter().flatten() {
        let evidence: Vec<String> = c["evidence"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| format!("`{}`", text(e)))
            .collect();
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            text(&c["class"]),
            if c["claimed"] == true { "yes" } else { "no" },
            evidence.join("<br>")
        ));
    }
    let list = |v: &Value| {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|x| format!("`{}`", text(x)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push_str(&format!(
        "\n## Profiles and transports\n\nProfiles: {}. Transports: {}.\n",
        list(&s["profiles"]),
        list(&s["transports"])
    ));
    out.push_str(&format!(
        "\n## Schemas\n\n{} generated schema files, digest `{}` (SHA-256 of their canonical JSON).\n",
        text(&s["schemas"]["files"]),
        text(&s["schemas"]["digest"])
    ));
    out.push_str("\n## Known limits\n\n");
    if let Some(limits) = s["limits"].as_object() {
        for (k, v) in limits {
            out.push_str(&format!("- `{k}`: {v}\n"));
        }
    }
    out.push_str(&format!(
        "\n## Answers\n\nSent by this runtime (each checked against the normative envelope schema), never requests to it: {}.\n",
        list(&s["answer_message_types"])
    ));
    out.push_str(&format!(
        "\n## Unsupported message types\n\nAnswered `{}`: {}.\n",
        text(&s["unsupported_message_code"]),
        list(&s["unsupported_message_types"])
    ));
    out
}
