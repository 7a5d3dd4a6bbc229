//! The closed error vocabulary (spec 12): 74 codes plus the parse-ceiling family.
//!
//! Every failure the library reports is an [`Error`] carrying exactly one [`Code`]. The wire string of a
//! code is [`Code::as_str`]; `Display` text is for humans.

use std::fmt;

macro_rules! codes {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal,)*) => {
        /// One wire code of the closed vocabulary (spec 12), or a parse ceiling (`ceiling:<key>`).
        #[non_exhaustive]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code {
            $($(#[$doc])* $variant,)*
            /// A parse ceiling was exceeded (spec 3; the `{:ceiling, key}` family).
            Ceiling(CeilingKey),
        }

        /// The 74 named codes, in spec order (the ceiling family is [`CeilingKey::ALL`]).
        pub const NAMED_CODES: &[Code] = &[$(Code::$variant,)*];

        impl Code {
            /// The code's wire string; ceilings project to `ceiling:<key>`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $wire,)*
                    Code::Ceiling(key) => key.wire(),
                }
            }

            /// Parse a wire string back into a code (the conformance runner's expected codes).
            pub fn from_wire(s: &str) -> Option<Code> {
                match s {
                    $($wire => Some(Code::$variant),)*
                    _ => CeilingKey::ALL.iter().find(|k| k.wire() == s).map(|k| Code::Ceiling(*k)),
                }
            }
        }
    };
}

codes! {
    /// `attestation_malformed` (spec 12).
    AttestationMalformed => "attestation_malformed",
    /// `audience_mismatch` (spec 12).
    AudienceMismatch => "audience_mismatch",
    /// `base64url_invalid` (spec 12).
    Base64urlInvalid => "base64url_invalid",
    /// `base64url_padded` (spec 12).
    Base64urlPadded => "base64url_padded",
    /// `binding_attestation_stale` (spec 12).
    BindingAttestationStale => "binding_attestation_stale",
    /// `binding_descriptor_mismatch` (spec 12).
    BindingDescriptorMismatch => "binding_descriptor_mismatch",
    /// `binding_incomplete` (spec 12).
    BindingIncomplete => "binding_incomplete",
    /// `bound_source_missing` (spec 12).
    BoundSourceMissing => "bound_source_missing",
    /// `bound_unit_mismatch` (spec 12).
    BoundUnitMismatch => "bound_unit_mismatch",
    /// `bound_unknown` (spec 12).
    BoundUnknown => "bound_unknown",
    /// `bound_value_invalid` (spec 12).
    BoundValueInvalid => "bound_value_invalid",
    /// `compatibility_duplicate_entry` (spec 12).
    CompatibilityDuplicateEntry => "compatibility_duplicate_entry",
    /// `compatibility_entry_missing` (spec 12).
    CompatibilityEntryMissing => "compatibility_entry_missing",
    /// `compatibility_identity_inexact` (spec 12).
    CompatibilityIdentityInexact => "compatibility_identity_inexact",
    /// `corpus_applicability_incomplete` (spec 12).
    CorpusApplicabilityIncomplete => "corpus_applicability_incomplete",
    /// `corpus_case_id_duplicate` (spec 12).
    CorpusCaseIdDuplicate => "corpus_case_id_duplicate",
    /// `corpus_case_invalid` (spec 12).
    CorpusCaseInvalid => "corpus_case_invalid",
    /// `corpus_count_mismatch` (spec 12).
    CorpusCountMismatch => "corpus_count_mismatch",
    /// `corpus_empty` (spec 12).
    CorpusEmpty => "corpus_empty",
    /// `corpus_file_set_mismatch` (spec 12).
    CorpusFileSetMismatch => "corpus_file_set_mismatch",
    /// `corpus_hash_mismatch` (spec 12).
    CorpusHashMismatch => "corpus_hash_mismatch",
    /// `corpus_index_invalid` (spec 12).
    CorpusIndexInvalid => "corpus_index_invalid",
    /// `deployment_digest_mismatch` (spec 12).
    DeploymentDigestMismatch => "deployment_digest_mismatch",
    /// `digest_algorithm_unsupported` (spec 12).
    DigestAlgorithmUnsupported => "digest_algorithm_unsupported",
    /// `digest_encoding_invalid` (spec 12).
    DigestEncodingInvalid => "digest_encoding_invalid",
    /// `digest_mismatch` (spec 12).
    DigestMismatch => "digest_mismatch",
    /// `duplicate_member` (spec 12).
    DuplicateMember => "duplicate_member",
    /// `extension_criticality_conflict` (spec 12).
    ExtensionCriticalityConflict => "extension_criticality_conflict",
    /// `extension_duplicate` (spec 12).
    ExtensionDuplicate => "extension_duplicate",
    /// `extension_namespace_invalid` (spec 12).
    ExtensionNamespaceInvalid => "extension_namespace_invalid",
    /// `extension_payload_forbidden` (spec 12).
    ExtensionPayloadForbidden => "extension_payload_forbidden",
    /// `extension_retired` (spec 12).
    ExtensionRetired => "extension_retired",
    /// `extension_schema_digest_mismatch` (spec 12).
    ExtensionSchemaDigestMismatch => "extension_schema_digest_mismatch",
    /// `extension_schema_unavailable` (spec 12).
    ExtensionSchemaUnavailable => "extension_schema_unavailable",
    /// `extension_unknown_critical` (spec 12).
    ExtensionUnknownCritical => "extension_unknown_critical",
    /// `federation_mapping_conflict` (spec 12).
    FederationMappingConflict => "federation_mapping_conflict",
    /// `federation_state_unmappable` (spec 12).
    FederationStateUnmappable => "federation_state_unmappable",
    /// `federation_terminal_conflict` (spec 12).
    FederationTerminalConflict => "federation_terminal_conflict",
    /// `forbidden_portable_value` (spec 12).
    ForbiddenPortableValue => "forbidden_portable_value",
    /// `integer_magnitude` (spec 12).
    IntegerMagnitude => "integer_magnitude",
    /// `invalid_cardinality` (spec 12).
    InvalidCardinality => "invalid_cardinality",
    /// `invalid_constraint` (spec 12).
    InvalidConstraint => "invalid_constraint",
    /// `invalid_encoding` (spec 12).
    InvalidEncoding => "invalid_encoding",
    /// `invalid_number` (spec 12).
    InvalidNumber => "invalid_number",
    /// `invalid_syntax` (spec 12).
    InvalidSyntax => "invalid_syntax",
    /// `invalid_type` (spec 12).
    InvalidType => "invalid_type",
    /// `lifecycle_state_invalid` (spec 12).
    LifecycleStateInvalid => "lifecycle_state_invalid",
    /// `missing_ceiling` (spec 12).
    MissingCeiling => "missing_ceiling",
    /// `missing_required_field` (spec 12).
    MissingRequiredField => "missing_required_field",
    /// `no_authoritative_recovery` (spec 12).
    NoAuthoritativeRecovery => "no_authoritative_recovery",
    /// `non_canonical_bytes` (spec 12).
    NonCanonicalBytes => "non_canonical_bytes",
    /// `nonportable_content` (spec 12).
    NonportableContent => "nonportable_content",
    /// `number_not_double_expressible` (spec 12).
    NumberNotDoubleExpressible => "number_not_double_expressible",
    /// `predicate_nodes_exceeded` (spec 12).
    PredicateNodesExceeded => "predicate_nodes_exceeded",
    /// `predicate_op_unknown` (spec 12).
    PredicateOpUnknown => "predicate_op_unknown",
    /// `predicate_path_unresolved` (spec 12).
    PredicatePathUnresolved => "predicate_path_unresolved",
    /// `protected_bound_clamp_denied` (spec 12).
    ProtectedBoundClampDenied => "protected_bound_clamp_denied",
    /// `protocol_revision_unsupported` (spec 12).
    ProtocolRevisionUnsupported => "protocol_revision_unsupported",
    /// `required_core_field_not_digest_covered` (spec 12).
    RequiredCoreFieldNotDigestCovered => "required_core_field_not_digest_covered",
    /// `required_core_field_unsupported` (spec 12).
    RequiredCoreFieldUnsupported => "required_core_field_unsupported",
    /// `schema_complexity_exceeded` (spec 12).
    SchemaComplexityExceeded => "schema_complexity_exceeded",
    /// `schema_dialect_unknown` (spec 12).
    SchemaDialectUnknown => "schema_dialect_unknown",
    /// `schema_invalid_shape` (spec 12).
    SchemaInvalidShape => "schema_invalid_shape",
    /// `schema_keyword_not_allowed` (spec 12).
    SchemaKeywordNotAllowed => "schema_keyword_not_allowed",
    /// `schema_keyword_value_invalid` (spec 12).
    SchemaKeywordValueInvalid => "schema_keyword_value_invalid",
    /// `schema_ref_cycle` (spec 12).
    SchemaRefCycle => "schema_ref_cycle",
    /// `schema_ref_unresolvable` (spec 12).
    SchemaRefUnresolvable => "schema_ref_unresolvable",
    /// `signature_algorithm_unsupported` (spec 12).
    SignatureAlgorithmUnsupported => "signature_algorithm_unsupported",
    /// `signature_key_unsupported` (spec 12).
    SignatureKeyUnsupported => "signature_key_unsupported",
    /// `signature_malformed` (spec 12).
    SignatureMalformed => "signature_malformed",
    /// `signature_not_verified` (spec 12).
    SignatureNotVerified => "signature_not_verified",
    /// `trailing_bytes` (spec 12).
    TrailingBytes => "trailing_bytes",
    /// `unknown_bound` (spec 12).
    UnknownBound => "unknown_bound",
    /// `unknown_member` (spec 12).
    UnknownMember => "unknown_member",
}

impl Code {
    /// Every declared code: the 74 named codes and the eight ceilings.
    pub fn all() -> impl Iterator<Item = Code> {
        NAMED_CODES
            .iter()
            .copied()
            .chain(CeilingKey::ALL.iter().map(|k| Code::Ceiling(*k)))
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The eight decoder limit names (spec 3; notes 12).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CeilingKey {
    /// Total input bytes (for the encoder: output bytes).
    Bytes,
    /// Container nesting depth.
    Depth,
    /// Members of one object.
    Members,
    /// Items of one array.
    Items,
    /// Values in the whole document.
    Nodes,
    /// UTF-8 bytes of one string value.
    String,
    /// UTF-8 bytes of one member name.
    Key,
    /// Bytes of one number lexeme.
    NumberLexeme,
}

impl CeilingKey {
    /// All eight keys in wire-name order.
    pub const ALL: [CeilingKey; 8] = [
        CeilingKey::Bytes,
        CeilingKey::Depth,
        CeilingKey::Items,
        CeilingKey::Key,
        CeilingKey::Members,
        CeilingKey::Nodes,
        CeilingKey::NumberLexeme,
        CeilingKey::String,
    ];

    /// The member name used in bounds maps (`depth`, `number_lexeme`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CeilingKey::Bytes => "bytes",
            CeilingKey::Depth => "depth",
            CeilingKey::Members => "members",
            CeilingKey::Items => "items",
            CeilingKey::Nodes => "nodes",
            CeilingKey::String => "string",
            CeilingKey::Key => "key",
            CeilingKey::NumberLexeme => "number_lexeme",
        }
    }

    fn wire(self) -> &'static str {
        match self {
            CeilingKey::Bytes => "ceiling:bytes",
            CeilingKey::Depth => "ceiling:depth",
            CeilingKey::Members => "ceiling:members",
            CeilingKey::Items => "ceiling:items",
            CeilingKey::Nodes => "ceiling:nodes",
            CeilingKey::String => "ceiling:string",
            CeilingKey::Key => "ceiling:key",
            CeilingKey::NumberLexeme => "ceiling:number_lexeme",
        }
    }
}

/// A deny (spec 1, 12): a code, the subject it names, and optional human detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code} at {subject}{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
pub struct Error {
    /// The wire code.
    pub code: Code,
    /// What the code is about (a member path, `bytes`, `bounds`, ...).
    pub subject: String,
    /// Optional human-readable detail; not an API.
    pub detail: Option<String>,
}

impl Error {
    /// A deny with a subject and no detail.
    pub fn new(code: Code, subject: impl Into<String>) -> Self {
        Error {
            code,
            subject: subject.into(),
            detail: None,
        }
    }

    /// A deny with detail.
    pub fn with_detail(code: Code, subject: impl Into<String>, detail: impl Into<String>) -> Self {
        Error {
            code,
            subject: subject.into(),
            detail: Some(detail.into()),
        }
    }
}

/// Shorthand for the library's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;
