package dev.hyspec.api;

import dev.hyspec.engine.ModelRegistry;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.MediaType;
import java.util.List;

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

    @GET
    public ModelList list() {
        return new ModelList("list", registry.model()
                .map(m -> List.of(new ModelCard(m.id(), "model", m.createdEpochSeconds(), "hyspec")))
                .orElse(List.of()));
    }
}
