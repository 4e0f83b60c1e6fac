//! The benchmark's `echo` tool on rmcp, the official Rust MCP SDK, over stdio: the load driver
//! (benches/pipe) calls `tools/call echo` with `{"text": ...}` and checks that the text comes
//! back as the result's first text content. Written the way rmcp's documentation shows a tool
//! server (its macros, its `stdio()` transport, Tokio's multi-threaded runtime), nothing tuned;
//! with `--pipes`, rmcp's `stdio_pipes()` transport instead (stdin and stdout as non-blocking
//! pipes on Tokio's reactor, not the blocking thread pool: its faster option for a server
//! launched with pipes).

use rmcp::handler::server::wrapper::Parameters;
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;

/// The echo tool's arguments.
#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to return.
    text: String,
}

#[derive(Debug, Clone)]
struct Echo;

#[tool_router]
impl Echo {
    #[tool(description = "Returns its text.")]
    fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> String {
        args.text
    }
}

#[tool_handler]
impl ServerHandler for Echo {}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().any(|arg| arg == "--pipes") {
        Echo.serve(rmcp::transport::stdio_pipes())
            .await?
            .waiting()
            .await?;
    } else {
        Echo.serve(rmcp::transport::stdio())
            .await?
            .waiting()
            .await?;
    }
    Ok(())
}
