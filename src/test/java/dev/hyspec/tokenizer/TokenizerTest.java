package dev.hyspec.tokenizer;

import static dev.hyspec.tokenizer.TestTokenizers.BOS;
import static dev.hyspec.tokenizer.TestTokenizers.EOS;
import static dev.hyspec.tokenizer.TestTokenizers.HELLO;
import static dev.hyspec.tokenizer.TestTokenizers.IM_END;
import static dev.hyspec.tokenizer.TestTokenizers.IM_START;
import static dev.hyspec.tokenizer.TestTokenizers.LLO;
import static dev.hyspec.tokenizer.TestTokenizers.SPACE_WORLD;
import static dev.hyspec.tokenizer.TestTokenizers.write;
import static dev.hyspec.tokenizer.TestTokenizers.writeJson;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Path;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TokenizerTest {
    @TempDir
    Path dir;

    private Tokenizer load() {
        return Tokenizer.load(dir).orElseThrow();
    }

    @Test
    void encodesWithBpeMergesAndWithoutThePostProcessorsBos() {
        writeJson(dir, "tokenizer.json", TestTokenizers.byteLevelBpe());
        try (Tokenizer tokenizer = load()) {
            assertArrayEquals(new int[] {HELLO, SPACE_WORLD}, tokenizer.encode("hello world"));
            assertArrayEquals(new int[] {HELLO}, tokenizer.encode("hello"));
            assertArrayEquals(new int[0], tokenizer.encode(""));
        }
    }

    @Test
    void asciiRoundTrips() {
        writeJson(dir, "tokenizer.json", TestTokenizers.byteLevelBpe());
        try (Tokenizer tokenizer = load()) {
            String text = "hello world, Hello World!\n\tx = 42;";
            assertEquals(text, tokenizer.decode(tokenizer.encode(text)));
        }
    }

    @Test
    void nonAsciiRoundTripsThroughBytes() {
        writeJson(dir, "tokenizer.json", TestTokenizers.byteLevelBpe());
        try (Tokenizer tokenizer = load()) {
            int[] ids = tokenizer.encode("héllo ✓");
            // h, é as its two UTF-8 bytes, "llo", the space, ✓ as its three UTF-8 bytes.
            assertArrayEquals(new int[] {'h', 0xC3, 0xA9, LLO, ' ', 0xE2, 0x9C, 0x93}, ids);
            assertEquals("héllo ✓", tokenizer.decode(ids));
            String mixed = "naïve café — 東京 🚀";
            assertEquals(mixed, tokenizer.decode(tokenizer.encode(mixed)));
        }
    }

    @Test
    void specialTokensInTextAreSingleIdsAndDecodeCanSkipThem() {
        writeJson(dir, "tokenizer.json", TestTokenizers.byteLevelBpe());
        try (Tokenizer tokenizer = load()) {
            int[] ids = tokenizer.encode("<|im_start|>hello<|im_end|>");
            assertArrayEquals(new int[] {IM_START, HELLO, IM_END}, ids);
            assertEquals("<|im_start|>hello<|im_end|>", tokenizer.decode(ids));
            assertEquals("hello", tokenizer.decode(ids, true));
        }
    }

    @Test
    void inputIsNotTruncatedEvenWhenTokenizerJsonAsksForIt() {
        ObjectNode json = TestTokenizers.byteLevelBpe();
        json.putObject("truncation")
                .put("direction", "Right")
                .put("max_length", 16)
                .put("strategy", "LongestFirst")
                .put("stride", 0);
        writeJson(dir, "tokenizer.json", json);
        try (Tokenizer tokenizer = load()) {
            String text = "hello world".repeat(2000);
            int[] ids = tokenizer.encode(text);
            assertEquals(4000, ids.length);
            assertEquals(text, tokenizer.decode(ids));
        }
    }

    @Test
    void bosAndEosComeFromTokenizerConfigAsStringOrObject() {
        writeJson(dir, "tokenizer.json", TestTokenizers.byteLevelBpe());
        ObjectNode config = TestTokenizers.chatmlConfig();
        config.putObject("bos_token").put("content", "<s>");
        config.put("eos_token", "</s>");
        writeJson(dir, "tokenizer_config.json", config);
        try (Tokenizer tokenizer = load()) {
            assertEquals(OptionalInt.of(BOS), tokenizer.bosTokenId());
            assertEquals(OptionalInt.of(EOS), tokenizer.eosTokenId());
        }
        writeJson(dir, "tokenizer_config.json", TestTokenizers.chatmlConfig());
        try (Tokenizer tokenizer = load()) {
            assertEquals(OptionalInt.of(BOS), tokenizer.bosTokenId());
            assertEquals(OptionalInt.of(IM_END), tokenizer.eosTokenId());
        }
    }

    @Test
    void bosAndEosAreEmptyWithoutConfigOrWhenNull() {
        writeJson(dir, "tokenizer.json", TestTokenizers.byteLevelBpe());
        try (Tokenizer tokenizer = load()) {
            assertEquals(OptionalInt.empty(), tokenizer.bosTokenId());
            assertEquals(OptionalInt.empty(), tokenizer.eosTokenId());
        }
        ObjectNode config = TestTokenizers.chatmlConfig();
        config.putNull("bos_token");
        writeJson(dir, "tokenizer_config.json", config);
        try (Tokenizer tokenizer = load()) {
            assertEquals(OptionalInt.empty(), tokenizer.bosTokenId());
            assertEquals(OptionalInt.of(IM_END), tokenizer.eosTokenId());
        }
    }

    @Test
    void tokenIdLooksUpVocabularyAndAddedTokens() {
        writeJson(dir, "tokenizer.json", TestTokenizers.byteLevelBpe());
        try (Tokenizer tokenizer = load()) {
            assertEquals(OptionalInt.of(SPACE_WORLD), tokenizer.tokenId("Ġworld"));
            assertEquals(OptionalInt.of(IM_END), tokenizer.tokenId("<|im_end|>"));
            assertEquals(OptionalInt.empty(), tokenizer.tokenId("world"));
            assertEquals(IM_END + 1, tokenizer.vocabularySize());
        }
    }

    @Test
    void folderWithoutTokenizerJsonGivesEmpty() {
        writeJson(dir, "tokenizer_config.json", TestTokenizers.chatmlConfig());
        assertTrue(Tokenizer.load(dir).isEmpty());
    }

    @Test
    void malformedTokenizerJsonNamesTheFile() {
        write(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", ");
        TokenizerException e = assertThrows(TokenizerException.class, () -> Tokenizer.load(dir));
        assertTrue(e.getMessage().contains(dir.resolve("tokenizer.json").toString()), e.getMessage());
        assertTrue(e.getMessage().contains("not valid JSON"), e.getMessage());
    }

    @Test
    void tokenizerJsonTheLibraryRejectsNamesTheFile() {
        ObjectNode json = TestTokenizers.byteLevelBpe();
        ((ObjectNode) json.get("model")).put("type", "NoSuchModel");
        writeJson(dir, "tokenizer.json", json);
        TokenizerException e = assertThrows(TokenizerException.class, () -> Tokenizer.load(dir));
        assertTrue(e.getMessage().startsWith(dir.resolve("tokenizer.json") + ": rejected by"), e.getMessage());
    }

    @Test
    void tokenizerJsonWithoutVocabNamesTheFileAndField() {
        ObjectNode json = TestTokenizers.byteLevelBpe();
        ((ObjectNode) json.get("model")).remove("vocab");
        writeJson(dir, "tokenizer.json", json);
        TokenizerException e = assertThrows(TokenizerException.class, () -> Tokenizer.load(dir));
        assertEquals(dir.resolve("tokenizer.json") + ": \"model\" has no \"vocab\"", e.getMessage());
    }

    @Test
    void malformedTokenizerConfigNamesTheFile() {
        writeJson(dir, "tokenizer.json", TestTokenizers.byteLevelBpe());
        write(dir, "tokenizer_config.json", "{\"eos_token\": \"</s>\",,}");
        TokenizerException e = assertThrows(TokenizerException.class, () -> Tokenizer.load(dir));
        assertTrue(e.getMessage().startsWith(dir.resolve("tokenizer_config.json") + ": is not valid JSON"),
                e.getMessage());
    }

    @Test
    void eosOfTheWrongTypeOrNotInTheVocabularyNamesTheFile() {
        writeJson(dir, "tokenizer.json", TestTokenizers.byteLevelBpe());
        ObjectNode config = TestTokenizers.chatmlConfig();
        config.put("eos_token", 7);
        writeJson(dir, "tokenizer_config.json", config);
        TokenizerException wrongType = assertThrows(TokenizerException.class, () -> Tokenizer.load(dir));
        assertEquals(dir.resolve("tokenizer_config.json")
                + ": \"eos_token\" must be a string or an object with a \"content\" field, found a number",
                wrongType.getMessage());

        config.put("eos_token", "<|endoftext|>");
        writeJson(dir, "tokenizer_config.json", config);
        TokenizerException unknown = assertThrows(TokenizerException.class, () -> Tokenizer.load(dir));
        assertTrue(unknown.getMessage().startsWith(dir.resolve("tokenizer_config.json")
                + ": \"eos_token\" is \"<|endoftext|>\", which is not a token of"), unknown.getMessage());
    }

    @Test
    void topLevelArrayIsRejected() {
        write(dir, "tokenizer.json", "[1, 2]");
        TokenizerException e = assertThrows(TokenizerException.class, () -> Tokenizer.load(dir));
        assertEquals(dir.resolve("tokenizer.json") + ": expected a JSON object at the top level, found an array",
                e.getMessage());
    }
}
