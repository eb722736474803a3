package dev.hyspec.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.hyspec.backend.Backend;
import dev.hyspec.backend.cuda.CudaRuntime;
import java.util.Optional;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/** hyspec.backend / activation-dtype / state-dtype choices where no CUDA device can be used. */
class BackendsTest {
    private static final Supplier<Optional<String>> NO_DEVICE = () -> Optional.of("the CUDA driver reports no device");

    @Test
    void autoFallsBackToTheCpuWithoutADevice() {
        try (Backend b = Backends.open("auto", "auto", "float32", NO_DEVICE)) {
            assertEquals("cpu", b.name());
        }
    }

    @Test
    void cudaWithoutADeviceFailsSayingWhy() {
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> Backends.open("cuda", "auto", "float32", NO_DEVICE));
        assertTrue(e.getMessage().contains("hyspec.backend=cuda"), e.getMessage());
        assertTrue(e.getMessage().contains("the CUDA driver reports no device"), e.getMessage());
    }

    @Test
    void theRealProbeSaysWhyWhenThereIsNoDevice() {
        Optional<String> why = CudaRuntime.unavailableReason();
        if (why.isPresent()) {
            assertTrue(!why.get().isBlank());
            try (Backend b = Backends.open("auto", "auto", "float32")) {
                assertEquals("cpu", b.name());
            }
            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> Backends.open("cuda", "auto", "float32"));
            assertTrue(e.getMessage().contains(why.get()), e.getMessage());
        }
    }

    @Test
    void unknownOrUnsupportedSettingsAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> Backends.open("tpu", "auto", "float32", NO_DEVICE));
        assertThrows(IllegalArgumentException.class, () -> Backends.open("cpu", "bfloat16", "float32", NO_DEVICE));
        assertThrows(IllegalArgumentException.class, () -> Backends.open("cpu", "auto", "bfloat16", NO_DEVICE));
        try (Backend b = Backends.open("cpu", "float32", "float32", NO_DEVICE)) {
            assertEquals("cpu", b.name());
        }
    }
}
