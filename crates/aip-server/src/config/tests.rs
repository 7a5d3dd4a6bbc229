//! The configuration's defaults, bounds and environment overrides.
#![allow(clippy::unwrap_used)]
use super::*;

#[test]
fn an_empty_file_yields_the_documented_defaults() {
    let dir = std::env::temp_dir().join(format!("aip-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("empty.toml");
    std::fs::write(&file, "").unwrap();
    let config = Config::load(Some(&file)).unwrap();
    assert_eq!(config.listen, default_listen());
    assert_eq!(config.limits.max_list_limit, 1000);
    assert!(config.admin.enabled);
}

#[test]
fn clock_skew_and_replay_window_outside_their_bounds_are_refused_naming_the_key() {
    let refused = |skew: u64, window: u64| {
        let mut config = Config::default();
        config.security.max_clock_skew_ms = skew;
        config.security.replay_window_ms = window;
        match config.check() {
            Err(e @ (ConfigError::OutOfRange { .. } | ConfigError::Ordered { .. })) => {
                e.key().map(str::to_owned)
            }
            Ok(()) => None,
            Err(other) => panic!("{other}"),
        }
    };
    assert_eq!(refused(300_000, 600_000), None);
    assert_eq!(refused(MAX_CLOCK_SKEW_MS, MAX_CLOCK_SKEW_MS), None);
    assert_eq!(
        refused(MAX_CLOCK_SKEW_MS + 1, 10 * MAX_CLOCK_SKEW_MS),
        Some("security.max_clock_skew_ms".to_owned())
    );
    assert_eq!(
        refused(0, 600_000),
        Some("security.max_clock_skew_ms".to_owned())
    );
    assert_eq!(
        refused(300_000, 0),
        Some("security.replay_window_ms".to_owned())
    );
    assert_eq!(
        refused(300_000, 299_999),
        Some("security.replay_window_ms".to_owned())
    );
}

#[test]
fn a_request_timeout_not_longer_than_the_longest_wait_or_no_request_slot_is_refused() {
    let check = |max_wait_ms: u64, request_timeout_ms: u64, max_in_flight_requests: usize| {
        let mut config = Config::default();
        config.limits.max_wait_ms = max_wait_ms;
        config.limits.request_timeout_ms = request_timeout_ms;
        config.limits.max_in_flight_requests = max_in_flight_requests;
        config.check().is_ok()
    };
    assert!(check(30_000, 90_000, 1024));
    assert!(check(500, 501, 1));
    assert!(!check(30_000, 30_000, 1024));
    assert!(!check(500, 3_600_001, 1024));
    assert!(!check(500, 1000, 0));
    assert!(!check(500, 1000, 100_001));
}

#[test]
fn a_list_limit_above_one_thousand_is_refused() {
    let mut config = Config::default();
    config.limits.max_list_limit = 1001;
    assert!(config.check().is_err());
}

#[test]
fn a_principal_with_two_token_sources_is_refused() {
    let figment = Figment::from(Toml::string(
        "[[principals]]\nid = \"a\"\ntoken_sha256 = \"00\"\ntoken_file = \"/x\"\n",
    ));
    let config: Config = figment.extract().unwrap();
    assert!(config.check().is_err());
}

#[test]
fn a_principal_may_carry_an_external_account_and_an_empty_one_is_refused() {
    let parse = |account: &str| {
        Figment::from(Toml::string(&format!(
            "[[principals]]\nid = \"a\"\ntoken_sha256 = \"00\"\nexternal_account = {account}\n"
        )))
        .extract::<Config>()
        .map_err(Box::new)
    };
    let config = parse("{ system = \"stripe\", id = \"acct_1\" }").unwrap();
    let account = config.principals[0].external_account.clone().unwrap();
    assert_eq!(
        (account.system.as_str(), account.id.as_str()),
        ("stripe", "acct_1")
    );
    assert!(
        parse("{ system = \"\", id = \"acct_1\" }")
            .unwrap()
            .check()
            .is_err()
    );
    assert!(parse("{ system = \"s\", id = \"a\", extra = 1 }").is_err());
}

/// Every option with an environment value different from its default and a check that it took
/// effect. Keep in step with the options tables of docs/configuration.md (a test compares them).
#[allow(clippy::type_complexity)]
fn env_overrides() -> Vec<(&'static str, &'static str, fn(&Config) -> bool)> {
    let mut all: Vec<(&'static str, &'static str, fn(&Config) -> bool)> = vec![
        ("AIP_LISTEN", "0.0.0.0:8080", |c| c.listen.port() == 8080),
        ("AIP_DATA_DIR", "/srv/aip", |c| {
            c.data_dir == Path::new("/srv/aip")
        }),
        ("AIP_DATABASE", "postgres://db/aip", |c| {
            c.database.as_deref() == Some("postgres://db/aip")
        }),
        ("AIP_ALLOWED_HOSTS", "[\"api.example.com\"]", |c| {
            c.allowed_hosts == ["api.example.com"]
        }),
        (
            "AIP_ALLOWED_ORIGINS",
            "[\"https://app.example.com\"]",
            |c| c.allowed_origins == ["https://app.example.com"],
        ),
        ("AIP_DEMO_CAPABILITIES", "false", |c| !c.demo_capabilities),
        ("AIP_AGENT__ID", "agent:prod", |c| {
            c.agent.id == "agent:prod"
        }),
        ("AIP_AGENT__NAME", "prod", |c| c.agent.name == "prod"),
        ("AIP_LIMITS__MAX_BODY_BYTES", "65536", |c| {
            c.limits.max_body_bytes == 65_536
        }),
        ("AIP_LIMITS__MAX_LIST_LIMIT", "500", |c| {
            c.limits.max_list_limit == 500
        }),
        ("AIP_LIMITS__DEFAULT_LIST_LIMIT", "50", |c| {
            c.limits.default_list_limit == 50
        }),
        ("AIP_LIMITS__MAX_WAIT_MS", "10000", |c| {
            c.limits.max_wait_ms == 10_000
        }),
        ("AIP_LIMITS__DEFAULT_ACTION_TIMEOUT_MS", "5000", |c| {
            c.limits.default_action_timeout_ms == 5_000
        }),
        ("AIP_LIMITS__MAX_ACTION_TIMEOUT_MS", "7000", |c| {
            c.limits.max_action_timeout_ms == 7_000
        }),
        ("AIP_LIMITS__ASYNC_WORKERS", "3", |c| {
            c.limits.async_workers == 3
        }),
        ("AIP_LIMITS__LEASE_MS", "9000", |c| {
            c.limits.lease_ms == 9_000
        }),
        ("AIP_LIMITS__JOB_MAX_ATTEMPTS", "2", |c| {
            c.limits.job_max_attempts == 2
        }),
        ("AIP_LIMITS__STREAM_HEARTBEAT_MS", "1000", |c| {
            c.limits.stream_heartbeat_ms == 1_000
        }),
        ("AIP_LIMITS__STREAM_BUFFER_EVENTS", "8", |c| {
            c.limits.stream_buffer_events == 8
        }),
        ("AIP_LIMITS__STREAM_SEND_TIMEOUT_MS", "2000", |c| {
            c.limits.stream_send_timeout_ms == 2_000
        }),
        ("AIP_LIMITS__WS_MAX_STREAMS", "4", |c| {
            c.limits.ws_max_streams == 4
        }),
        ("AIP_LIMITS__MAX_IN_FLIGHT_REQUESTS", "16", |c| {
            c.limits.max_in_flight_requests == 16
        }),
        ("AIP_LIMITS__MAX_QUEUED_ACTIONS", "64", |c| {
            c.limits.max_queued_actions == 64
        }),
        ("AIP_LIMITS__MAX_OPEN_STREAMS", "32", |c| {
            c.limits.max_open_streams == 32
        }),
        (
            "AIP_LIMITS__READ_RATE_PER_PRINCIPAL",
            "{per_second=50,burst=100}",
            |c| {
                c.limits.read_rate_per_principal
                    == Some(RateConfig {
                        per_second: 50,
                        burst: 100,
                    })
            },
        ),
        (
            "AIP_LIMITS__READ_RATE_PER_TENANT",
            "{per_second=500,burst=1000}",
            |c| {
                c.limits.read_rate_per_tenant
                    == Some(RateConfig {
                        per_second: 500,
                        burst: 1000,
                    })
            },
        ),
        ("AIP_LIMITS__BODY_READ_TIMEOUT_MS", "2000", |c| {
            c.limits.body_read_timeout_ms == 2000
        }),
        ("AIP_LIMITS__REQUEST_TIMEOUT_MS", "45000", |c| {
            c.limits.request_timeout_ms == 45_000
        }),
        ("AIP_LIMITS__RECONCILE_AFTER_MS", "2500", |c| {
            c.limits.reconcile_after_ms == 2_500
        }),
        (
            "AIP_LIMITS__RATE_PER_PRINCIPAL",
            "{per_second=5,burst=10}",
            |c| {
                c.limits.rate_per_principal
                    == Some(RateConfig {
                        per_second: 5,
                        burst: 10,
                    })
            },
        ),
        (
            "AIP_LIMITS__RATE_PER_TENANT",
            "{per_second=50,burst=100}",
            |c| {
                c.limits.rate_per_tenant
                    == Some(RateConfig {
                        per_second: 50,
                        burst: 100,
                    })
            },
        ),
        (
            "AIP_LIMITS__PRINCIPAL_RATES",
            "{svc={per_second=1,burst=2}}",
            |c| {
                c.limits.principal_rates.get("svc")
                    == Some(&RateConfig {
                        per_second: 1,
                        burst: 2,
                    })
            },
        ),
        (
            "AIP_LIMITS__TENANT_RATES",
            "{acme={per_second=3,burst=4}}",
            |c| {
                c.limits.tenant_rates.get("acme")
                    == Some(&RateConfig {
                        per_second: 3,
                        burst: 4,
                    })
            },
        ),
        ("AIP_ADMIN__ENABLED", "false", |c| !c.admin.enabled),
        ("AIP_ADMIN__TENANT", "ops", |c| c.admin.tenant == "ops"),
        ("AIP_SHUTDOWN__GRACE_MS", "5000", |c| {
            c.shutdown.grace_ms == 5000
        }),
        ("AIP_SHUTDOWN__MUTATION_GRACE_MS", "120000", |c| {
            c.shutdown.mutation_grace_ms() == 120_000
        }),
        (
            "AIP_PRINCIPALS",
            "[{id=\"svc\",tenant=\"t\",token_sha256=\"00\",external_account={system=\"s\",id=\"a\"}}]",
            |c| {
                c.principals.len() == 1
                    && c.principals[0].tenant == "t"
                    && c.principals[0]
                        .external_account
                        .as_ref()
                        .is_some_and(|a| a.id == "a")
            },
        ),
        ("AIP_SECURITY__REQUIRE_SIGNED_ENVELOPES", "true", |c| {
            c.security.require_signed_envelopes
        }),
        ("AIP_SECURITY__MAX_CLOCK_SKEW_MS", "1000", |c| {
            c.security.max_clock_skew_ms == 1_000
        }),
        ("AIP_SECURITY__REPLAY_WINDOW_MS", "2000", |c| {
            c.security.replay_window_ms == 2_000
        }),
        ("AIP_SECURITY__REFUSAL_AUDIT_WINDOW_MS", "2500", |c| {
            c.security.refusal_audit_window_ms == 2_500
        }),
        (
            "AIP_SECURITY__TRUSTED_SIGNERS",
            "[{did=\"did:key:z6Mk\",principal=\"svc\"}]",
            |c| {
                c.security.trusted_signers.len() == 1
                    && c.security.trusted_signers[0].principal == "svc"
            },
        ),
        (
            "AIP_CAPABILITIES",
            "[{id=\"cap:x\",handler={type=\"http\",url=\"https://h/x\"}}]",
            |c| c.capabilities.len() == 1 && c.capabilities[0].capability.get("id").is_some(),
        ),
        ("AIP_NATS__URL", "nats://n:4222", |c| {
            c.nats.url.as_deref() == Some("nats://n:4222")
        }),
        ("AIP_NATS__TRUST_DOMAIN", "example_com", |c| {
            c.nats.trust_domain == "example_com"
        }),
        ("AIP_NATS__SERVICE", "gateway", |c| {
            c.nats.service == "gateway"
        }),
        ("AIP_NATS__SERVICE_VERSION", "v2", |c| {
            c.nats.service_version == "v2"
        }),
        ("AIP_NATS__QUEUE_GROUP", "workers", |c| {
            c.nats.queue_group == "workers"
        }),
        ("AIP_NATS__PRINCIPAL", "svc", |c| {
            c.nats.principal.as_deref() == Some("svc")
        }),
        ("AIP_NATS__USER", "u", |c| {
            c.nats.user.as_deref() == Some("u")
        }),
        ("AIP_NATS__PASSWORD_FILE", "/run/p", |c| {
            c.nats.password_file.is_some()
        }),
        ("AIP_NATS__TOKEN_FILE", "/run/t", |c| {
            c.nats.token_file.is_some()
        }),
        ("AIP_NATS__NKEY_SEED_FILE", "/run/n", |c| {
            c.nats.nkey_seed_file.is_some()
        }),
        ("AIP_NATS__CREDENTIALS_FILE", "/run/c", |c| {
            c.nats.credentials_file.is_some()
        }),
        ("AIP_NATS__TLS_REQUIRED", "true", |c| c.nats.tls_required),
        ("AIP_NATS__TLS_CA_FILE", "/run/ca.pem", |c| {
            c.nats.tls_ca_file.is_some()
        }),
        ("AIP_NATS__TLS_CLIENT_CERT_FILE", "/run/c.pem", |c| {
            c.nats.tls_client_cert_file.is_some()
        }),
        ("AIP_NATS__TLS_CLIENT_KEY_FILE", "/run/k.pem", |c| {
            c.nats.tls_client_key_file.is_some()
        }),
        ("AIP_NATS__MAX_IN_FLIGHT", "7", |c| {
            c.nats.max_in_flight == 7
        }),
    ];
    all.extend(super::callbacks::env_overrides());
    all.extend(super::peers::env_overrides());
    all.push(("AIP_MCP__ENABLED", "false", |c| !c.mcp.enabled));
    all.push(("AIP_MCP__DEV_PRINCIPAL", "alice", |c| {
        c.mcp.dev_principal.as_deref() == Some("alice")
    }));
    all
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail fixes the closure's error type
fn every_option_is_overridable_by_its_environment_variable() {
    for (var, value, took_effect) in env_overrides() {
        figment::Jail::expect_with(|jail| {
            let default = Config::sources(None).unwrap().extract::<Config>()?;
            assert!(
                !took_effect(&default),
                "{var}: the test value equals the default"
            );
            jail.set_env(var, value);
            let config = Config::sources(None).unwrap().extract::<Config>()?;
            assert!(took_effect(&config), "{var}={value} did not take effect");
            Ok(())
        });
    }
}

#[test]
#[allow(clippy::result_large_err)] // figment::Jail fixes the closure's error type
fn an_environment_value_overrides_the_file_and_unrelated_aip_variables_are_ignored() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "aip.toml",
            "listen = \"127.0.0.1:9000\"\n[limits]\nlease_ms = 5000\n",
        )?;
        jail.set_env("AIP_LIMITS__LEASE_MS", "6000");
        jail.set_env("AIP_TEST_POSTGRES_URL", "postgres://elsewhere");
        let config = Config::load(Some(Path::new("aip.toml"))).map_err(|e| e.to_string())?;
        assert_eq!(config.listen.port(), 9000);
        assert_eq!(config.limits.lease_ms, 6000);
        Ok(())
    });
}

#[test]
fn docs_configuration_lists_every_environment_variable() {
    let docs = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md"),
    )
    .unwrap();
    for (var, _, _) in env_overrides() {
        assert!(
            docs.contains(&format!("`{var}`")),
            "docs/configuration.md does not list {var}"
        );
    }
}

#[test]
fn an_unknown_key_is_refused() {
    let figment = Figment::from(Toml::string("lisen = \"127.0.0.1:1\"\n"));
    assert!(figment.extract::<Config>().is_err());
}

#[test]
fn each_section_refuses_a_broken_rule_with_a_typed_error_naming_its_key() {
    let cases: &[(&str, &str)] = &[
        ("[limits]\nmax_list_limit = 1001", "limits.max_list_limit"),
        (
            "[limits]\nstream_buffer_events = 0",
            "limits.stream_buffer_events",
        ),
        ("[limits]\nws_max_streams = 5000", "limits.ws_max_streams"),
        ("[limits]\nlease_ms = 999", "limits.lease_ms"),
        (
            "[limits]\nmax_wait_ms = 1000\nrequest_timeout_ms = 1000",
            "limits.request_timeout_ms",
        ),
        (
            "[limits.rate_per_principal]\nper_second = 0\nburst = 1",
            "limits.rate_per_principal.per_second",
        ),
        (
            "[limits]\nmax_running_per_tenant = 0",
            "limits.max_running_per_tenant",
        ),
        ("[shutdown]\ngrace_ms = 3600001", "shutdown.grace_ms"),
        (
            "[shutdown]\ngrace_ms = 2000\nmutation_grace_ms = 1000",
            "shutdown.mutation_grace_ms",
        ),
        ("[nats]\nqueue_group = \"a b\"", "nats.queue_group"),
        ("[nats]\nuser = \"u\"", "nats.user"),
        ("[channels]\nmax_parts = 0", "channels.max_parts"),
        ("[callbacks]\nmax_redirects = 6", "callbacks.max_redirects"),
        (
            "[callbacks]\nallowed_hosts = [\"A.example\"]",
            "callbacks.allowed_hosts",
        ),
        (
            "[retention]\npurge_interval_secs = 0",
            "retention.purge_interval_secs",
        ),
        ("[retention]\nevents_secs = 0", "retention.events_secs"),
        (
            "[retention]\narchive_dir = \"a\"\npurge_unarchived = true",
            "retention.archive_dir",
        ),
        ("[delegation]\nmax_chain = 0", "delegation.max_chain"),
        ("[delegation]\nregion = \"EU\"", "delegation.region"),
        (
            "[[principals]]\nid = \"a\"\ntoken_sha256 = \"00\"\ntoken_file = \"/x\"",
            "principals[a]",
        ),
        (
            "[[principals]]\nid = \"a\"\ntenant = \"aip.node\"\ntoken_sha256 = \"00\"",
            "principals[a].tenant",
        ),
        (
            "[[approval_policies]]\nid = \"p\"\ntenant = \"t\"",
            "approval_policies[p]",
        ),
    ];
    for (toml, key) in cases {
        let config: Config = Figment::from(Toml::string(toml))
            .extract()
            .unwrap_or_else(|e| panic!("{toml}: {e}"));
        let err = config.check().expect_err(toml);
        assert_eq!(err.key(), Some(*key), "{toml}: {err}");
        assert!(err.to_string().contains(key), "{toml}: {err}");
    }
}

#[test]
fn the_drain_waits_30_s_for_handlers_and_twice_that_for_mutations_unless_configured() {
    let default = Config::default();
    assert_eq!(default.shutdown.grace_ms, 30_000);
    assert_eq!(default.shutdown.mutation_grace_ms(), 60_000);
    let short = ShutdownConfig {
        grace_ms: 500,
        mutation_grace_ms: None,
    };
    assert_eq!(short.mutation_grace_ms(), 1000);
    let long = ShutdownConfig {
        grace_ms: 3_000_000,
        mutation_grace_ms: None,
    };
    assert_eq!(long.mutation_grace_ms(), 3_600_000, "capped at an hour");
}
