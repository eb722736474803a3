package dev.hyspec.api;

import dev.hyspec.engine.ModelRegistry;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.PathParam;
import jakarta.ws.rs.core.MediaType;
import jakarta.ws.rs.core.Response;
import java.util.List;
import java.util.Map;

/** {@code GET /v1/models}: the OpenAI model list. */
@Path("/v1/models")
@Produces(MediaType.APPLICATION_JSON)
public class ModelsResource {
    private final ModelRegistry registry;

    public ModelsResource(ModelRegistry registry) {
        this.registry = registry;
    }

    /** One OpenAI model object. */
    public record ModelCard(String id, String object, long created, String owned_by) {}

    /** The OpenAI list envelope. */
    public record ModelList(String object, List<ModelCard> data) {}

    /** {@code GET /v1/models/{id}}: the model card, or a 404 OpenAI error object. */
    @GET
    @Path("{id}")
    public Response get(@PathParam("id") String id) {
        return registry.model().filter(m -> m.id().equals(id))
                .map(m -> Response.ok(new ModelCard(m.id(), "model", m.createdEpochSeconds(), "hyspec")).build())
                .orElseGet(() -> Response.status(404).entity(Map.of("error", errorBody(id))).build());
    }

    private static Map<String, Object> errorBody(String id) {
        Map<String, Object> e = new java.util.LinkedHashMap<>();
        e.put("message", "the model '" + id + "' does not exist");
        e.put("type", "invalid_request_error");
        e.put("param", "model");
        e.put("code", "model_not_found");
        return e;
    }

    @GET
    public ModelList list() {
        return new ModelList("list", registry.model()
                .map(m -> List.of(new ModelCard(m.id(), "model", m.createdEpochSeconds(), "hyspec")))
                .orElse(List.of()));
    }
}
