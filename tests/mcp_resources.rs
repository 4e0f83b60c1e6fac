//! Resources, resource templates and prompts of `mcpipe demo`.

mod util;

use serde_json::json;
use util::mcp::Proc;

fn ready() -> Proc {
    let mut demo = Proc::demo(&[]);
    demo.initialize();
    demo
}

#[test]
fn resources_list_shows_the_readme() {
    let mut demo = ready();
    demo.request(1, "resources/list", json!({}));
    let result = demo.result(1);
    let resources = result["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 1);
    assert_eq!(resources[0]["uri"], "mcpipe://demo/readme");
    assert!(resources[0]["name"].is_string());
}

#[test]
fn reading_the_readme_gives_text() {
    let mut demo = ready();
    demo.request(
        1,
        "resources/read",
        json!({ "uri": "mcpipe://demo/readme" }),
    );
    let result = demo.result(1);
    let contents = result["contents"].as_array().unwrap();
    assert_eq!(contents[0]["uri"], "mcpipe://demo/readme");
    assert!(contents[0]["text"].as_str().unwrap().contains("echo"));
    assert!(contents[0].get("blob").is_none());
}

#[test]
fn templates_are_listed_and_read_through() {
    let mut demo = ready();
    demo.request(1, "resources/templates/list", json!({}));
    let result = demo.result(1);
    assert_eq!(
        result["resourceTemplates"][0]["uriTemplate"],
        "mcpipe://demo/echo/{text}"
    );
    demo.request(
        2,
        "resources/read",
        json!({ "uri": "mcpipe://demo/echo/hello" }),
    );
    let result = demo.result(2);
    assert_eq!(result["contents"][0]["text"], "hello");
    assert_eq!(result["contents"][0]["uri"], "mcpipe://demo/echo/hello");
}

#[test]
fn an_unknown_resource_is_not_found_with_its_uri() {
    let mut demo = ready();
    for (id, uri) in [
        (1, "mcpipe://demo/nothing"),
        (2, "mcpipe://demo/echo/"),
        (3, ""),
    ] {
        demo.request(id, "resources/read", json!({ "uri": uri }));
        let response = demo.response(id);
        assert_eq!(response["error"]["code"], -32002, "{response}");
        assert_eq!(response["error"]["data"]["uri"], uri);
    }
    demo.request(4, "resources/read", json!({}));
    assert_eq!(demo.error_code(4), -32602);
}

#[test]
fn a_bad_cursor_is_invalid_params() {
    let mut demo = ready();
    for (id, method) in [
        (1, "tools/list"),
        (2, "resources/list"),
        (3, "resources/templates/list"),
        (4, "prompts/list"),
    ] {
        demo.request(id, method, json!({ "cursor": "not-a-cursor" }));
        assert_eq!(demo.error_code(id), -32602, "{method}");
    }
}

#[test]
fn prompts_list_shows_greet_with_its_argument() {
    let mut demo = ready();
    demo.request(1, "prompts/list", json!({}));
    let result = demo.result(1);
    let greet = &result["prompts"][0];
    assert_eq!(greet["name"], "greet");
    assert_eq!(greet["arguments"][0]["name"], "name");
    assert_eq!(greet["arguments"][0]["required"], true);
}

#[test]
fn getting_greet_mentions_the_name() {
    let mut demo = ready();
    demo.request(
        1,
        "prompts/get",
        json!({ "name": "greet", "arguments": { "name": "Ada" } }),
    );
    let result = demo.result(1);
    let message = &result["messages"][0];
    assert_eq!(message["role"], "user");
    assert_eq!(message["content"]["type"], "text");
    assert!(message["content"]["text"].as_str().unwrap().contains("Ada"));
}

#[test]
fn prompt_errors_are_invalid_params() {
    let mut demo = ready();
    demo.request(1, "prompts/get", json!({ "name": "greet" }));
    let response = demo.response(1);
    assert_eq!(response["error"]["code"], -32602);
    assert!(response["error"]["message"]
        .as_str()
        .unwrap()
        .contains("name"));
    demo.request(2, "prompts/get", json!({ "name": "nope" }));
    assert_eq!(demo.error_code(2), -32602);
    demo.request(3, "prompts/get", json!({}));
    assert_eq!(demo.error_code(3), -32602);
}
