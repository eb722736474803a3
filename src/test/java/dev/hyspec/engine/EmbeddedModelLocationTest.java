package dev.hyspec.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Where the server looks for the embedded model when {@code hyspec.model.path} is unset: the working
 * directory first, then the application's own location and the folders above it, so that
 * {@code java -jar target/quarkus-app/quarkus-run.jar} finds {@code models/kjv-hybrid} from anywhere.
 */
class EmbeddedModelLocationTest {
    static final Path REPO = Path.of("").toAbsolutePath();
    static final Path MODEL = REPO.resolve(ModelRegistry.EMBEDDED_MODEL);

    @Test
    void foundFromTheWorkingDirectory(@TempDir Path elsewhere) {
        assertEquals(Optional.of(MODEL), ModelRegistry.embeddedModel(REPO, Optional.empty()));
        assertEquals(Optional.of(MODEL), ModelRegistry.embeddedModel(REPO, Optional.of(elsewhere)));
    }

    @Test
    void foundAboveTheApplicationJarFromAnyWorkingDirectory(@TempDir Path elsewhere) {
        Path appJar = REPO.resolve("target/quarkus-app/app/hyspec-1.0.0-SNAPSHOT.jar");
        assertEquals(Optional.of(MODEL), ModelRegistry.embeddedModel(elsewhere, Optional.of(appJar)));
        assertEquals(Optional.of(MODEL),
                ModelRegistry.embeddedModel(elsewhere, Optional.of(REPO.resolve("target/quarkus-app/quarkus-run.jar"))));
    }

    @Test
    void absentWhenNeitherPlaceHoldsIt(@TempDir Path elsewhere) {
        assertTrue(ModelRegistry.embeddedModel(elsewhere, Optional.of(elsewhere.resolve("app.jar"))).isEmpty());
    }
}
