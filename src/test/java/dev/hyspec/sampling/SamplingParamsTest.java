package dev.hyspec.sampling;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

class SamplingParamsTest {

    private static SamplingParams params(double temperature, double topP, int topK, int maxTokens) {
        return new SamplingParams(temperature, topP, topK, null, maxTokens, List.of(2), false);
    }

    private static void assertRejected(SamplingParams p, String field, String value) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, p::validate);
        assertTrue(e.getMessage().startsWith(field + " "),
                () -> "message should start with the field name " + field + ": " + e.getMessage());
        assertTrue(e.getMessage().contains(value),
                () -> "message should show the bad value " + value + ": " + e.getMessage());
    }

    @Test
    void validValuesPass() {
        assertDoesNotThrow(() -> params(0.0, 1.0, 0, 1).validate());
        assertDoesNotThrow(() -> params(0.7, 0.9, 50, 256).validate());
        assertDoesNotThrow(() -> params(2.0, 1e-9, -1, 1).validate());
        assertDoesNotThrow(() -> params(1.0, 1.0, 1, Integer.MAX_VALUE).validate());
    }

    @Test
    void temperatureOutOfRangeNamesTheField() {
        assertRejected(params(-0.1, 1.0, 0, 16), "temperature", "-0.1");
        assertRejected(params(Double.NaN, 1.0, 0, 16), "temperature", "NaN");
        assertRejected(params(Double.POSITIVE_INFINITY, 1.0, 0, 16), "temperature", "Infinity");
    }

    @Test
    void topPOutOfRangeNamesTheField() {
        assertRejected(params(1.0, 0.0, 0, 16), "topP", "0.0");
        assertRejected(params(1.0, -0.5, 0, 16), "topP", "-0.5");
        assertRejected(params(1.0, 1.0000001, 0, 16), "topP", "1.0000001");
        assertRejected(params(1.0, Double.NaN, 0, 16), "topP", "NaN");
    }

    @Test
    void topKOutOfRangeNamesTheField() {
        assertRejected(params(1.0, 1.0, -2, 16), "topK", "-2");
        assertRejected(params(1.0, 1.0, Integer.MIN_VALUE, 16), "topK", String.valueOf(Integer.MIN_VALUE));
    }

    @Test
    void maxTokensOutOfRangeNamesTheField() {
        assertRejected(params(1.0, 1.0, 0, 0), "maxTokens", "0");
        assertRejected(params(1.0, 1.0, 0, -5), "maxTokens", "-5");
    }

    @Test
    void stopTokenIdsOutOfRangeNamesTheField() {
        assertRejected(new SamplingParams(1.0, 1.0, 0, null, 8, List.of(3, -1), false),
                "stopTokenIds", "-1");
        assertRejected(new SamplingParams(1.0, 1.0, 0, null, 8, Arrays.asList(3, null), false),
                "stopTokenIds", "null");
    }

    @Test
    void greedyIsTemperatureZeroAsInVllm() {
        assertTrue(params(0.0, 1.0, 0, 1).isGreedy());
        assertTrue(params(1e-6, 0.5, 10, 1).isGreedy());
        assertFalse(params(1e-5, 1.0, 0, 1).isGreedy());
        assertFalse(params(1.0, 1.0, 0, 1).isGreedy());
        assertTrue(SamplingParams.greedy(4).isGreedy());
    }

    @Test
    void topKAndTopPSwitches() {
        assertFalse(params(1.0, 1.0, 0, 1).topKActive(10));
        assertFalse(params(1.0, 1.0, -1, 1).topKActive(10));
        assertFalse(params(1.0, 1.0, 10, 1).topKActive(10));
        assertTrue(params(1.0, 1.0, 9, 1).topKActive(10));
        assertFalse(params(1.0, 1.0, 0, 1).topPActive());
        assertTrue(params(1.0, 0.99, 0, 1).topPActive());
    }

    @Test
    void stopTokenIdsAreCopiedAndNullMeansEmpty() {
        List<Integer> ids = new ArrayList<>(List.of(5, 7));
        SamplingParams p = new SamplingParams(1.0, 1.0, 0, 3L, 8, ids, false);
        ids.add(9);
        assertEquals(List.of(5, 7), p.stopTokenIds());
        assertThrows(UnsupportedOperationException.class, () -> p.stopTokenIds().add(1));
        assertTrue(p.isStopToken(7));
        assertFalse(p.isStopToken(9));
        assertEquals(List.of(), new SamplingParams(1.0, 1.0, 0, null, 8, null, true).stopTokenIds());
    }
}
