package dev.hyspec.tokenizer;

import static dev.hyspec.tokenizer.TestTokenizers.HELLO;
import static dev.hyspec.tokenizer.TestTokenizers.IM_END;
import static dev.hyspec.tokenizer.TestTokenizers.LLO;
import static dev.hyspec.tokenizer.TestTokenizers.writeJson;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class IncrementalDecoderTest {
    @TempDir
    Path dir;

    private Tokenizer tokenizer;

    private Tokenizer byteLevel() {
        writeJson(dir, "tokenizer.json", TestTokenizers.byteLevelBpe());
        tokenizer = Tokenizer.load(dir).orElseThrow();
        return tokenizer;
    }

    @AfterEach
    void close() {
        if (tokenizer != null) {
            tokenizer.close();
        }
    }

    private static List<String> deltas(IncrementalDecoder decoder, int[] ids) {
        List<String> deltas = new ArrayList<>();
        for (int id : ids) {
            deltas.add(decoder.add(id));
        }
        return deltas;
    }

    @Test
    void holdsBackSplitMultibyteCharactersUntilComplete() {
        Tokenizer tokenizer = byteLevel();
        int[] ids = {'h', 0xC3, 0xA9, LLO, ' ', 0xE2, 0x9C, 0x93};
        IncrementalDecoder decoder = new IncrementalDecoder(tokenizer, false);
        List<String> deltas = deltas(decoder, ids);
        assertEquals(List.of("h", "", "é", "llo", " ", "", "", "✓"), deltas);
        assertEquals("", decoder.flush());
        for (String delta : deltas) {
            assertFalse(delta.contains("\uFFFD"), delta);
        }
    }

    @Test
    void concatenatedDeltasEqualTheFullDecode() {
        Tokenizer tokenizer = byteLevel();
        // Long enough for the decoder to drop shown tokens from its buffer several times.
        int[] ids = tokenizer.encode("héllo ✓ hello world 東京 🚀 ".repeat(12) + "<|im_end|>");
        StringBuilder text = new StringBuilder();
        IncrementalDecoder decoder = new IncrementalDecoder(tokenizer, false);
        for (String delta : deltas(decoder, ids)) {
            assertFalse(delta.contains("\uFFFD"), delta);
            text.append(delta);
        }
        text.append(decoder.flush());
        assertEquals(tokenizer.decode(ids), text.toString());
        assertEquals("héllo ✓ hello world 東京 🚀 ".repeat(12) + "<|im_end|>", text.toString());
    }

    @Test
    void skipsSpecialTokensWhenAsked() {
        Tokenizer tokenizer = byteLevel();
        IncrementalDecoder decoder = new IncrementalDecoder(tokenizer, true);
        assertEquals(List.of("hello", ""), deltas(decoder, new int[] {HELLO, IM_END}));
    }

    @Test
    void flushEmitsAnIncompleteCharacterAtTheEnd() {
        Tokenizer tokenizer = byteLevel();
        int[] ids = {HELLO, 0xE2, 0x9C};
        IncrementalDecoder decoder = new IncrementalDecoder(tokenizer, false);
        assertEquals(List.of("hello", "", ""), deltas(decoder, ids));
        String rest = decoder.flush();
        assertEquals(tokenizer.decode(ids), "hello" + rest);
        assertEquals("", decoder.flush());
    }

    @Test
    void promptGivesTheFirstTokenItsLeadingSpace() {
        writeJson(dir, "tokenizer.json", TestTokenizers.metaspaceWordLevel());
        tokenizer = Tokenizer.load(dir).orElseThrow();
        int[] prompt = tokenizer.encode("hello");
        int[] generated = tokenizer.encode("world world");
        // Decoded alone, the Metaspace decoder drops the first word's space.
        assertEquals("world world", tokenizer.decode(generated));

        IncrementalDecoder withPrompt = new IncrementalDecoder(tokenizer, prompt, false);
        assertEquals(List.of(" world", " world"), deltas(withPrompt, generated));
        IncrementalDecoder withoutPrompt = new IncrementalDecoder(tokenizer, false);
        assertEquals(List.of("world", " world"), deltas(withoutPrompt, generated));
    }
}
