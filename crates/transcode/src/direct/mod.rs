//! The direct transcoder: schema-driven, no intermediate tree. JSON is converted to wire
//! bytes straight from the parser's scan, and wire bytes to JSON straight from a scan of the
//! bytes, with per-message plans built once when the schema loads.
//!
//! It is an optimistic fast path: whatever it does not handle (errors, non-canonical wire
//! order, options it does not implement) it gives up on with [`Bail`], and the caller runs the
//! reference path (`crate::reference`) on the whole message. The differential tests hold the
//! two to identical output.

pub(crate) mod json_in;
pub(crate) mod json_out;
pub(crate) mod plan;

/// "Let the reference path do this one."
#[derive(Debug)]
pub(crate) struct Bail;
