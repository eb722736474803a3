package dev.hyspec.api;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.hasSize;

import io.quarkus.test.junit.QuarkusTest;
import org.junit.jupiter.api.Test;

/** The application starts over real HTTP, loads the configured checkpoint and reports it. */
@QuarkusTest
class ModelsResourceTest {

    @Test
    void listsTheConfiguredCheckpoint() {
        given().get("/v1/models").then().statusCode(200)
                .body("object", equalTo("list"))
                .body("data", hasSize(1))
                .body("data[0].id", equalTo("nemotron_h_chat"))
                .body("data[0].object", equalTo("model"))
                .body("data[0].owned_by", equalTo("hyspec"));
    }

    @Test
    void readyOnceTheModelIsLoaded() {
        given().get("/q/health/ready").then().statusCode(200)
                .body("status", equalTo("UP"))
                .body("checks.find { it.name == 'model' }.data.architecture", equalTo("NemotronHForCausalLM"));
    }

    @Test
    void retrievesTheServedModelAndRefusesOthers() {
        given().get("/v1/models/nemotron_h_chat").then().statusCode(200)
                .body("id", equalTo("nemotron_h_chat")).body("object", equalTo("model"));
        given().get("/v1/models/gpt-4o").then().statusCode(404)
                .body("error.code", equalTo("model_not_found")).body("error.param", equalTo("model"));
    }
}
