package dev.hyspec.clients;

import static io.restassured.RestAssured.given;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.restassured.http.ContentType;
import io.restassured.response.Response;

/**
 * The server's own answers, fetched with RestAssured as plain JSON: the reference that the client
 * tests hold each client's view of the same request to.
 */
final class OwnEndpoint {
    static final ObjectMapper JSON = new ObjectMapper();

    private OwnEndpoint() {}

    /** {@code POST path} (e.g. {@code /v1/chat/completions}) expecting {@code status}; the response body. */
    static JsonNode post(String path, JsonNode body, int status) {
        Response r = given().contentType(ContentType.JSON).body(body.toString()).when().post(path);
        assertEquals(status, r.statusCode(), r.asString());
        try {
            return JSON.readTree(r.asString());
        } catch (JsonProcessingException e) {
            throw new AssertionError("not JSON: " + r.asString(), e);
        }
    }

    /** The token ids of a JSON array. */
    static int[] ids(JsonNode array) {
        int[] out = new int[array.size()];
        for (int i = 0; i < out.length; i++) {
            out[i] = array.get(i).intValue();
        }
        return out;
    }
}
